package engine

import (
	"context"

	"github.com/graylb/graylb/internal/routestate"
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
type ContextHandler interface {
	Value(ctx context.Context, name string) string
}

// ContextHandlerFunc adapts a function to a ContextHandler.
type ContextHandlerFunc func(ctx context.Context, name string) string

// Value calls f(ctx, name).
func (f ContextHandlerFunc) Value(ctx context.Context, name string) string { return f(ctx, name) }

// chainHandlers returns a ContextHandler that asks each handler in turn
// and returns the first non-empty value (nil handlers skipped), nil when
// there is none and the handler itself when there is one.
func chainHandlers(handlers []ContextHandler) ContextHandler {
	hs := make(chainHandler, 0, len(handlers))
	for _, h := range handlers {
		if h != nil {
			hs = append(hs, h)
		}
	}
	switch len(hs) {
	case 0:
		return nil
	case 1:
		return hs[0]
	}
	return hs
}

type chainHandler []ContextHandler

func (c chainHandler) Value(ctx context.Context, name string) string {
	for _, h := range c {
		if v := h.Value(ctx, name); v != "" {
			return v
		}
	}
	return ""
}

// Request is what a Stage sees of one call: its context and service, and a
// way to read the call's named values.
type Request struct {
	Context context.Context
	Service string
	// call reads the keys of the call an adapter routes (routeWith), asked
	// before handler; nil when the request is not an adapter's.
	call    ContextHandler
	handler ContextHandler
	// vals are the WithValue values of read, the Context the Request was
	// made with, read once for every key the routing asks for; nil: not
	// read. A filter that replaces Context gets the new one's values.
	vals *valuesCtx
	read context.Context
	// state is the routing state a server side admitted for the request
	// being served (routestate.From(read)): its keys are asked after the
	// call's and the ContextHandlers', before WithValue's; it holds the
	// canary's draw for the request.
	state *routestate.State
	lane  string // set by a match rule (see Lane)
}

// init makes r the Request of one call (ctx not nil) whose context has
// the program-set values vals (valuesIn): they are read once, for every key
// the routing asks for. (An adapter's reader of the call's keys, when
// there is one, is set in r.call after init.) Fields are set one by one, in place: a Request
// built as a composite literal and then copied is copied with wide loads
// right after the narrower stores that built it, which the processor
// cannot forward (measured: a quarter of a pick).
func (r *Request) init(ctx context.Context, service string, h ContextHandler, vals *valuesCtx) {
	if vals == nil {
		vals = noValues
	}
	r.Context, r.Service, r.handler, r.vals, r.read = ctx, service, h, vals, ctx
	r.state = stateIn(ctx)
}

// Value returns the request's named value: from the keys of the call (an
// adapter's call, then the ContextHandlers, then the keys the server side
// admitted from the request being served, over whatever transport), else
// from WithValue, else "".
func (r Request) Value(name string) string { return r.value(name) }

// value is Value without copying the Request.
func (r *Request) value(name string) string {
	if v := r.handlerValue(name); v != "" {
		return v
	}
	return r.contextValue(name)
}

// handlerValue returns the call's value under name: the adapter's reader
// first, then the ContextHandlers, then the admitted keys of the request
// being served; "" when none has one.
func (r *Request) handlerValue(name string) string {
	if r.call != nil {
		if v := r.call.Value(r.Context, name); v != "" {
			return v
		}
	}
	if r.handler != nil {
		if v := r.handler.Value(r.Context, name); v != "" {
			return v
		}
	}
	return r.admitted(name)
}

// admitted returns the value under name that a server side admitted for
// the request being served ("" when none): of the state on the context the
// Request was made with (a filter's replacement Context is derived from
// it, and admits nothing of its own).
func (r *Request) admitted(name string) string {
	if r.state == nil {
		return "" // the usual case, inlined: nothing admitted
	}
	return r.state.Get(name)
}

// admittedAs is admitted, else the value of the admitted key that holds
// role for the LoadBalancer that admitted it (whose key names may differ).
func (r *Request) admittedAs(name string, role routestate.Role) string {
	if r.state == nil {
		return ""
	}
	if v := r.state.Get(name); v != "" {
		return v
	}
	return r.state.Role(role)
}

// valueAs is value with admittedAs in place of admitted.
func (r *Request) valueAs(name string, role routestate.Role) string {
	if v := r.handlerValue(name); v != "" {
		return v
	}
	if v := r.state.Role(role); v != "" {
		return v
	}
	return r.contextValue(name)
}

// contextValue returns the request's value set by WithValue under name.
func (r *Request) contextValue(name string) string {
	if r.vals == nil || r.read != r.Context {
		return ValueFrom(r.Context, name)
	}
	return r.vals.get(name)
}

// WithUntrustedCaller returns a copy of ctx marked as serving a caller
// outside the trust boundary. The server adapters' trust boundaries set it
// (httpctx.WithTrusted, grpcctx.WithTrusted); the client adapters then
// settle the request's side on every outgoing call made with the context:
// they write its kind even when nothing decided it (prod, "false"), so no
// later hop's rules can be steered by what the caller sent, and they do
// not let the caller's headers feed this hop's match rules.
func WithUntrustedCaller(ctx context.Context) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	s := routestate.From(ctx)
	if s.IsUntrusted() {
		return ctx
	}
	return routestate.With(ctx, s.Untrusted())
}

// UntrustedCaller reports whether ctx was marked by WithUntrustedCaller.
func UntrustedCaller(ctx context.Context) bool {
	return routestate.From(ctx).IsUntrusted()
}
