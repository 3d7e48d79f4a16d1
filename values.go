package graylb

import (
	"context"

	"github.com/graylb/graylb/internal/engine"
)

// WithValue returns a copy of ctx that carries value under name: a
// request-scoped value set by the program. The gray decision consults it
// after the call's own keys (the ContextHandler) and before the caller's
// own flag, e.g.
//
//	ctx = graylb.WithValue(ctx, "gray", "true")
//
// Names are case-insensitive, as header and metadata names are: a value
// set under "X-Region" is the value of x-region for the LoadBalancer's keys,
// match rules, filters and ValueFrom. The name is kept in lower case (ASCII),
// converted here once rather than at each read.
func WithValue(ctx context.Context, name, value string) context.Context {
	return engine.WithValue(ctx, name, value)
}

// ValueFrom returns the value set by WithValue under name, in any letter
// case, or "".
func ValueFrom(ctx context.Context, name string) string {
	return engine.ValueFrom(ctx, name)
}
