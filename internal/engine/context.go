package engine

import (
	"context"

	"github.com/graylb/graylb/internal/routestate"
)

// ContextHandler is graylb.ContextHandler.
type ContextHandler interface {
	Value(ctx context.Context, name string) string
}

// ContextHandlerFunc is graylb.ContextHandlerFunc.
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

// Request is filter.Request.
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

// WithUntrustedCaller is adapter.WithUntrustedCaller.
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

// UntrustedCaller is adapter.UntrustedCaller.
func UntrustedCaller(ctx context.Context) bool {
	return routestate.From(ctx).IsUntrusted()
}
