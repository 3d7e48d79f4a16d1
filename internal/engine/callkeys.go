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

// kindToPassWith is kindToPass for an adapter that reads the keys of the
// call it makes with call (see routeWith); passWith decides the same for
// package adapter's write for the next hop.
func (lb *LoadBalancer) kindToPassWith(ctx context.Context, call ContextHandler) (Kind, bool) {
	if ctx == nil {
		ctx = context.Background()
	}
	if UntrustedCaller(ctx) {
		k, _ := lb.requestKind(ctx, call)
		return k, true
	}
	rl := lb.rules.Load()
	if !lb.gray.selfGray && len(rl.users) == 0 && rl.canary == 0 && len(rl.matches) == 0 && ValueFrom(ctx, lb.gray.header) == "" && !drawnFor(ctx) {
		return Prod, false
	}
	k, src := lb.requestKind(ctx, call)
	return k, !src.Travels()
}

// laneToPassWith is laneToPass for an adapter that reads the keys of the
// call it makes with call (see routeWith); Decide and passWith give it to
// package adapter.
func (lb *LoadBalancer) laneToPassWith(ctx context.Context, call ContextHandler) string {
	rl := lb.rules.Load()
	if len(rl.matches) == 0 {
		return ""
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var r Request
	r.init(ctx, "", lb.handlerFor(call), valuesIn(ctx))
	r.call = call
	_, _, lane := lb.gray.decideRequest(&r, rl)
	if lane == "" || r.Value(lb.versionHeader()) != "" {
		return ""
	}
	return lane
}

// passWith decides once what an adapter writes on the call it makes with
// ctx, whose keys call reads: the kind and whether to write it (as
// kindToPassWith), and the lane to write (as laneToPassWith), from one
// decision under one version of the rules.
func (lb *LoadBalancer) passWith(ctx context.Context, call ContextHandler) (Kind, bool, string) {
	if ctx == nil {
		ctx = context.Background()
	}
	rl := lb.rules.Load()
	untrusted := UntrustedCaller(ctx)
	if !untrusted && !lb.gray.selfGray && len(rl.users) == 0 && rl.canary == 0 && len(rl.matches) == 0 && ValueFrom(ctx, lb.gray.header) == "" && !drawnFor(ctx) {
		return Prod, false, ""
	}
	var r Request
	r.init(ctx, "", lb.handlerFor(call), valuesIn(ctx))
	r.call = call
	k, src, lane := lb.gray.decideRequest(&r, rl)
	if lane != "" && r.Value(lb.versionHeader()) != "" {
		lane = ""
	}
	return k, untrusted || !src.Travels(), lane
}

// requestKind returns the kind of the request in ctx under the rules in
// force (closed and disabled rules aside: they decide where a kind goes,
// not what it is), and what decided it, reading the call's keys through
// call (nil: the ContextHandlers alone). An adapter that writes the kind on
// the outgoing call when !src.Travels() makes every later hop route the
// same way (package adapter's Balancer.Decide).
func (lb *LoadBalancer) requestKind(ctx context.Context, call ContextHandler) (Kind, KindSource) {
	if ctx == nil {
		ctx = context.Background()
	}
	var r Request
	r.init(ctx, "", lb.handlerFor(call), valuesIn(ctx))
	r.call = call
	return lb.gray.requestKind(&r, lb.rules.Load())
}

// drawnFor reports whether a canary drew for the request served with ctx:
// its kind then comes from that draw, under any LoadBalancer's rules.
func drawnFor(ctx context.Context) bool {
	_, ok := routestate.From(ctx).Drawn()
	return ok
}
