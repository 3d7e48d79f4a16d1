package engine

import (
	"context"
	"reflect"

	"github.com/graylb/graylb/internal/routestate"
)

// An adapter (the HTTP Transport, the gRPC interceptors and picker) knows
// the call it routes and reads that call's own keys itself — the headers of
// the outgoing and the incoming request, the outgoing and the kept incoming
// metadata — whether or not the program registered a ContextHandler
// (WithContextHandler stays for reading other places). It passes its
// reader to the *With methods below (through package adapter); Pick reads
// through the ContextHandlers alone.
//
// A reader equal to one of the LoadBalancer's ContextHandlers (the
// adapter's own Handler(), registered by the program too) is asked once:
// the routing asks the reader, then the others.

// handlerSet is the LoadBalancer's ContextHandlers for an adapter's
// reader: for each handler of a comparable type, the chain of the others.
type handlerSet struct {
	own    []ContextHandler // handlers of comparable types
	others []ContextHandler // others[i]: the chain without own[i]
}

// newHandlerSet returns the set of hs (nil ones dropped), nil when no
// handler is of a comparable type.
func newHandlerSet(hs []ContextHandler) *handlerSet {
	var s handlerSet
	for i, h := range hs {
		if h == nil || !reflect.TypeOf(h).Comparable() {
			continue
		}
		rest := make([]ContextHandler, 0, len(hs)-1)
		rest = append(append(rest, hs[:i]...), hs[i+1:]...)
		s.own = append(s.own, h)
		s.others = append(s.others, chainHandlers(rest))
	}
	if len(s.own) == 0 {
		return nil
	}
	return &s
}

// handlerFor returns the ContextHandlers to ask after call: lb's chain,
// without a handler equal to call. (Comparing call with a handler of a
// comparable type cannot panic: equal dynamic types are comparable.)
func (lb *LoadBalancer) handlerFor(call ContextHandler) ContextHandler {
	if s := lb.handlers; s != nil && call != nil {
		for i, h := range s.own {
			if h == call {
				return s.others[i]
			}
		}
	}
	return lb.handler
}

// routeWith routes for an adapter that reads the keys of the call it
// routes (package adapter's Balancer.Route): call (nil: none) is asked for the request's values before the
// LoadBalancer's ContextHandlers, and a ContextHandler equal to it is not
// asked again. call must be safe for concurrent use and should not
// allocate.
func (lb *LoadBalancer) routeWith(ctx context.Context, service string, call ContextHandler) (routing, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s := lb.services.Load().get(service)
	if s == nil {
		var err error
		if s, err = lb.addService(ctx, service); err != nil {
			lb.failedUnrouted(ctx, service, call, err)
			return routing{}, err
		}
	}
	if s.unlisted {
		var r Request
		r.init(ctx, service, lb.handlerFor(call), valuesIn(ctx))
		r.call = call
		n, d := s.tree.Load().route(&r)
		err := s.tree.Load().noInstance(d.kind)
		lb.failedUnroutedKind(service, d.kind, err)
		return routing{Kind: d.kind, Source: d.source, Outcome: d.outcome, Lane: d.lane, leaf: n}, err
	}
	return lb.route(ctx, service, s.tree.Load(), call)
}

// routeWith is LoadBalancer.routeWith over the router's list (package
// adapter's Router.Route).
func (r *router) routeWith(ctx context.Context, call ContextHandler) (routing, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return r.lb.route(ctx, r.service, r.tree, call)
}

// decide returns the decision for the request in ctx, whose call's keys
// call reads (see routeWith), under the rules in force, with no routing:
// its kind, what decided it and the lane a match rule gives it when the
// call carries no version of its own (closed and disabled rules aside:
// they decide where a kind goes, not what it is). It is the decision the
// routing makes, for an adapter that writes it on a call it does not
// route (package adapter's Balancer.Stamp). For an untrusted caller it
// asks no ContextHandler: only call, which the adapter cleared of the
// caller's keys.
func (lb *LoadBalancer) decide(ctx context.Context, call ContextHandler) Decision {
	if ctx == nil {
		ctx = context.Background()
	}
	if stateIn(ctx).IsShadow() {
		return Decision{Kind: Gray, Source: FromKey} // a shadow copy is gray whatever its keys say
	}
	h := lb.handlerFor(call)
	if UntrustedCaller(ctx) {
		h = nil // a ContextHandler may read the call's raw keys, which a proxy copied from the caller
	}
	var r Request
	r.init(ctx, "", h, valuesIn(ctx))
	r.call = call
	k, src, lane := lb.gray.decideRequest(&r, lb.rules.Load())
	if lane != "" && r.valueAs(lb.versionHeader(), routestate.RoleVersion) != "" {
		lane = ""
	}
	return Decision{Kind: k, Source: src, Lane: lane}
}

// detach returns a context for work that outlives the request served with
// ctx: not cancelled with it, carrying its routing state (the keys its
// server side admitted, its trust, its canary draw), the values the
// program put on it (WithValue), and the decision lb makes for it now,
// fixed: later decisions made with it take that kind and lane unless a
// call carries a gray key of its own (see decideRequest).
func (lb *LoadBalancer) detach(ctx context.Context) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	d := lb.decide(ctx, nil)
	st := routestate.From(ctx).Detached(routestate.Decided{Set: true, Kind: uint8(d.Kind), Source: uint8(d.Source), Lane: d.Lane})
	out := routestate.With(context.Background(), st)
	var pairs []*valuesCtx
	for v := valuesIn(ctx); v != nil && v != noValues; v = v.up {
		pairs = append(pairs, v)
	}
	for i := len(pairs) - 1; i >= 0; i-- {
		out = WithValue(out, pairs[i].name, pairs[i].value)
	}
	return out
}
