package graylb

import (
	"context"
	"time"

	"github.com/graylb/graylb/internal/adapterhook"
)

// The adapter surface. Transport adapters (httpctx, grpcctx, otelgraylb,
// and any other) reach the LoadBalancer through package adapter, never
// through methods of *LoadBalancer: adapter.For(lb) obtains the value
// below through adapterhook.Of, set once here. Its methods are exported so
// that they satisfy an interface declared in package adapter; the type is
// not, so they are not part of this package's API.
//
// The result types are unnamed (aliases of type literals): package
// adapter declares the same literals, and identical literals are one type,
// so the methods match adapter's interface without either package naming
// the other's types. A route's candidates travel as a *node in an
// interface: a pointer, so passing them allocates nothing.

// adapterDecision is a request's decision: its kind, what decided it, what
// the gray decision did, and the lane a match rule gave it.
type adapterDecision = struct {
	Kind    Kind
	Source  KindSource
	Outcome Outcome
	Lane    string
}

// adapterCandidates are the candidates of one route: a leaf of a routing
// tree (*node).
type adapterCandidates = interface {
	Instances() []Instance
	Picker() Picker
	Next() int
	Begin(i int) (*Stats, int64)
}

// adapterRouter is a router over an explicit instance list (*router).
type adapterRouter = interface {
	Route(ctx context.Context, call ContextHandler) (adapterDecision, adapterCandidates, error)
}

// adapterLB is the LoadBalancer as package adapter sees it.
type adapterLB LoadBalancer

func init() {
	adapterhook.Of = func(v any, build func(lb, surface any) any) any {
		lb, ok := v.(*LoadBalancer)
		if !ok || lb == nil {
			return nil
		}
		if p := lb.adapter.Load(); p != nil {
			return *p
		}
		made := build(lb, (*adapterLB)(lb))
		lb.adapter.CompareAndSwap(nil, &made)
		return *lb.adapter.Load()
	}
}

func (a *adapterLB) lb() *LoadBalancer { return (*LoadBalancer)(a) }

// decisionOf returns r's decision and candidates (a nil interface, not a
// nil *node, when it has none).
func decisionOf(r routing) (adapterDecision, adapterCandidates) {
	d := adapterDecision{Kind: r.Kind, Source: r.Source, Outcome: r.Outcome, Lane: r.Lane}
	if r.leaf == nil {
		return d, nil
	}
	return d, r.leaf
}

func (a *adapterLB) MatchKeys() []string { return a.lb().matchKeys() }

// RulesDraw reports whether the rules in force draw the kind of a request
// no key decided (a canary).
func (a *adapterLB) RulesDraw() bool { return a.lb().rules.Load().canary > 0 }

func (a *adapterLB) Route(ctx context.Context, service string, call ContextHandler) (adapterDecision, adapterCandidates, error) {
	r, err := a.lb().routeWith(ctx, service, call)
	d, c := decisionOf(r)
	return d, c, err
}

func (a *adapterLB) Reroute(ctx context.Context, service string, d adapterDecision, first adapterCandidates, tried func(Instance) bool, call ContextHandler) (adapterDecision, adapterCandidates, error) {
	f := routing{Kind: d.Kind, Source: d.Source, Outcome: d.Outcome, Lane: d.Lane}
	f.leaf, _ = first.(*node)
	r, err := a.lb().rerouteWith(ctx, service, f, tried, call)
	nd, c := decisionOf(r)
	return nd, c, err
}

func (a *adapterLB) NewRouter(service string, list []Instance, policy Policy) (adapterRouter, error) {
	r, err := a.lb().newRouter(service, list, policy)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (a *adapterLB) Decide(ctx context.Context, call ContextHandler) adapterDecision {
	k, src := a.lb().requestKind(ctx, call)
	return adapterDecision{Kind: k, Source: src, Lane: a.lb().laneToPassWith(ctx, call)}
}

func (a *adapterLB) PassWith(ctx context.Context, call ContextHandler) (Kind, bool, string) {
	return a.lb().passWith(ctx, call)
}

func (a *adapterLB) Report(service string, inst Instance, ok bool, latency time.Duration) {
	a.lb().report(service, inst, ok, latency)
}

func (a *adapterLB) Done(s *Stats, start int64, ok bool) { started{stats: s, start: start}.Done(ok) }

// DoneObserved reports a call done when a CallObserver is set: to the
// instance's Stats as statsOK when s is not nil, and to the CallObserver
// as callOK with the call's duration from start (on monoNow's clock).
func (a *adapterLB) DoneObserved(service string, inst Instance, kind Kind, s *Stats, start int64, statsOK, callOK bool) {
	if s != nil {
		started{stats: s, start: start}.Done(statsOK)
	}
	if o := a.calls; o != nil {
		o(service, inst, kind, callOK, time.Duration(monoNow()-start))
	}
}

// CallObserved reports whether a CallObserver is set: calls then need a
// start time even without Stats.
func (a *adapterLB) CallObserved() bool { return a.calls != nil }

// Now is a call's start time on monoNow's clock.
func (a *adapterLB) Now() int64 { return monoNow() }

func (a *adapterLB) Discard(s *Stats) { started{stats: s}.Discard() }

func (a *adapterLB) OnRulesChange(fn func()) (stop func()) { return a.lb().onRulesChange(fn) }

func (a *adapterLB) OnEjectionChange(fn func(service string)) (stop func()) {
	return a.lb().onEjectionChange(fn)
}

func (a *adapterLB) Policy() Policy { return a.lb().policy }

func (a *adapterLB) Cache() *Cache { return a.lb().cache }

// VersionMetadataKey is the instance metadata key of the LoadBalancer's
// VersionFilter (the last one, as for its request key), DefaultVersionKey
// when it has none.
func (a *adapterLB) VersionMetadataKey() string {
	key := DefaultVersionKey
	for _, f := range a.lb().filters {
		if v, ok := f.(*VersionFilter); ok {
			key = v.metaKey
		}
	}
	return key
}

// Route runs the router's chain for the request in ctx (the adapter
// surface of router.routeWith).
func (r *router) Route(ctx context.Context, call ContextHandler) (adapterDecision, adapterCandidates, error) {
	rt, err := r.routeWith(ctx, call)
	d, c := decisionOf(rt)
	return d, c, err
}

// The candidates' methods, for package adapter.

func (n *node) Instances() []Instance { return n.instances }

func (n *node) Picker() Picker { return n.pickerOf() }

func (n *node) Next() int { return n.next() }

// Begin counts a call to candidate i in flight and returns its Stats and
// start (nil and 0 when none are kept).
func (n *node) Begin(i int) (*Stats, int64) {
	st := n.statsOf()
	if st == nil {
		return nil, 0
	}
	s := st[i]
	s.inflight.Add(1)
	return s, monoNow()
}
