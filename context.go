package graylb

import (
	"context"

	"github.com/graylb/graylb/internal/engine"
)

// ContextHandler reads a named request value (a header) for the call
// described by ctx. It returns "" when the value is absent. Names are
// case-insensitive, as header and metadata names are: graylb asks for its
// own keys as configured and for match rule keys in lower case, so an
// implementation matches name in any letter case (http.Header.Get and gRPC
// metadata do). Implementations must be safe for concurrent use and should
// not allocate.
//
// The httpctx package reads net/http headers (outgoing request first, then
// the incoming request being served); grpcctx reads gRPC metadata.
type ContextHandler = engine.ContextHandler

// ContextHandlerFunc adapts a function to a ContextHandler.
type ContextHandlerFunc = engine.ContextHandlerFunc

// Request is what a Stage sees of one call: its context and service, and a
// way to read the call's named values.
type Request = engine.Request

// WithUntrustedCaller returns a copy of ctx marked as serving a caller
// outside the trust boundary. The server adapters' trust boundaries set it
// (httpctx.WithTrusted, grpcctx.WithTrusted); the client adapters then
// settle the request's side on every outgoing call made with the context:
// they write its kind even when nothing decided it (prod, "false"), so no
// later hop's rules can be steered by what the caller sent, and they do
// not let the caller's headers feed this hop's match rules.
func WithUntrustedCaller(ctx context.Context) context.Context {
	return engine.WithUntrustedCaller(ctx)
}

// UntrustedCaller reports whether ctx was marked by WithUntrustedCaller.
func UntrustedCaller(ctx context.Context) bool {
	return engine.UntrustedCaller(ctx)
}
