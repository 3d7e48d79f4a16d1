package adapter

import (
	"context"

	"github.com/graylb/graylb/internal/engine"
)

// KindSource says what decided a request's kind (Decision.Source).
// Travels() reports whether the next hop sees the decision without being
// told: only a key the call carries travels on its own. Balancer.Stamp
// writes the kind, in its canonical spelling, for every source but
// FromDefault.
type KindSource = engine.KindSource

// The sources of a request's kind.
const (
	FromDefault KindSource = engine.FromDefault // nothing said anything: prod
	FromKey     KindSource = engine.FromKey     // the gray key the call carries (a header, gRPC metadata)
	FromContext KindSource = engine.FromContext // a value the program put on the context (graylb.WithValue)
	FromSelf    KindSource = engine.FromSelf    // the caller's own gray flag (graylb.WithSelfGray)
	FromRules   KindSource = engine.FromRules   // a gray-user or match rule, or the canary's draw
)

// WithUntrustedCaller returns a copy of ctx marked as serving a caller
// outside the trust boundary, as the server adapters' trust boundaries do
// (httpctx.WithTrusted, grpcctx.WithTrusted). The client adapters then
// settle the request's side on every call made with it: they write its
// kind even when nothing decided it, so no later hop's rules can be
// steered by what the caller sent, and the caller's keys feed no match
// rule. It drops the keys a server side admitted before.
func WithUntrustedCaller(ctx context.Context) context.Context {
	return engine.WithUntrustedCaller(ctx)
}

// UntrustedCaller reports whether ctx was marked by WithUntrustedCaller.
func UntrustedCaller(ctx context.Context) bool { return engine.UntrustedCaller(ctx) }
