package graylb

import (
	"context"

	"github.com/graylb/graylb/internal/engine"
)

// WithValue returns a copy of ctx that carries value under name, a
// request value set by the program:
//
//	ctx = graylb.WithValue(ctx, "gray", "true")
//
// The LoadBalancer's keys, match rules and filters read it after the
// call's own keys (headers, metadata) and, for the gray value, before
// WithSelfGray. Names are matched in any letter case, as header names
// are.
func WithValue(ctx context.Context, name, value string) context.Context {
	return engine.WithValue(ctx, name, value)
}

// ValueFrom returns the value WithValue set under name, in any letter
// case, or "".
func ValueFrom(ctx context.Context, name string) string { return engine.ValueFrom(ctx, name) }

// ContextHandler reads a named request value (a header) of the call
// described by ctx:
//
//	Value(ctx context.Context, name string) string
//
// It returns "" when the value is absent, matches name in any letter case
// (as http.Header.Get and gRPC metadata do), is safe for concurrent use
// and should not allocate. WithContextHandler installs one; the adapters
// read their own transports without one.
type ContextHandler = engine.ContextHandler

// ContextHandlerFunc adapts a function func(ctx context.Context, name
// string) string to a ContextHandler.
type ContextHandlerFunc = engine.ContextHandlerFunc
