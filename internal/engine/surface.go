package engine

import (
	"context"
	"time"
)

// The adapter surface. Transport adapters (httpctx, grpcctx, otelgraylb
// and any other) reach a LoadBalancer through package adapter, whose
// Balancer is a defined type over LoadBalancer: adapter.For converts a
// *graylb.LoadBalancer to a *adapter.Balancer, both defined over this
// package's LoadBalancer, and its methods call the exported methods below.
// package graylb's LoadBalancer, a defined type too, declares only the
// user's methods, so none of these is part of the user's API.

// Decision is a request's decision: its kind, what decided it, what the
// gray decision did, and the lane a match rule gave it.
type Decision struct {
	Kind    Kind
	Source  KindSource
	Outcome Outcome
	Lane    string
}

// Candidates are the candidates of one route: a leaf of a routing tree.
// The zero Candidates has none.
type Candidates struct{ n *node }

// Router routes over an explicit instance list (see NewRouter). The zero
// Router routes nothing.
type Router struct{ r *router }

// decisionOf returns r's decision and candidates.
func decisionOf(r routing) (Decision, Candidates) {
	return Decision{Kind: r.Kind, Source: r.Source, Outcome: r.Outcome, Lane: r.Lane}, Candidates{r.leaf}
}

// MatchKeys returns the request keys the match rules in force name, in
// lower case (nil when none). The slice is shared.
func (lb *LoadBalancer) MatchKeys() []string { return lb.matchKeys() }

// RulesDraw reports whether the rules in force draw the kind of a request
// no key decided (a canary).
func (lb *LoadBalancer) RulesDraw() bool { return lb.rules.Load().canary > 0 }

// Route runs the chain of service for the request in ctx, reading the
// call's keys through call first (nil: the ContextHandlers alone).
func (lb *LoadBalancer) Route(ctx context.Context, service string, call ContextHandler) (Decision, Candidates, error) {
	r, err := lb.routeWith(ctx, service, call)
	d, c := decisionOf(r)
	return d, c, err
}

// Reroute returns the route of a retry of a request first routed as d
// over first, around the instances tried reports.
func (lb *LoadBalancer) Reroute(ctx context.Context, service string, d Decision, first Candidates, tried func(Instance) bool, call ContextHandler) (Decision, Candidates, error) {
	f := routing{Kind: d.Kind, Source: d.Source, Outcome: d.Outcome, Lane: d.Lane, leaf: first.n}
	r, err := lb.rerouteWith(ctx, service, f, tried, call)
	nd, c := decisionOf(r)
	return nd, c, err
}

// NewRouter builds a Router for service over list with policy (nil: the
// LoadBalancer's) under the rules in force.
func (lb *LoadBalancer) NewRouter(service string, list []Instance, policy Policy) (Router, error) {
	r, err := lb.newRouter(service, list, policy)
	if err != nil {
		return Router{}, err
	}
	return Router{r}, nil
}

// Decide returns the decision for the request in ctx without routing
// (see decide). Outcome is left Selected.
func (lb *LoadBalancer) Decide(ctx context.Context, call ContextHandler) Decision {
	return lb.decide(ctx, call)
}

// Detach is graylb.LoadBalancer.Detach.
func (lb *LoadBalancer) Detach(ctx context.Context) context.Context { return lb.detach(ctx) }

// Report is adapter.Balancer.Report.
func (lb *LoadBalancer) Report(service string, inst Instance, ok bool, latency time.Duration) {
	lb.report(service, inst, ok, latency)
}

// DoneObserved reports a call done at end when a CallObserver is set: to
// the instance's Stats (when s is not nil) as End does, and to the
// CallObserver as callOK with the call's duration from start to end (on
// Now's clock). served is the kind of the instances that served it,
// requested the request's.
func (lb *LoadBalancer) DoneObserved(service string, inst Instance, served, requested Kind, s *Stats, start, end int64, a Answer, retryAfter time.Duration, callOK bool) {
	if s != nil {
		started{stats: s, start: start, kind: requested}.endAt(end, a, retryAfter)
	}
	if o := lb.calls; o != nil {
		o(service, inst, served, callOK, time.Duration(end-start))
	}
}

// CallObserved reports whether a CallObserver is set: calls then need a
// start time even without Stats.
func (lb *LoadBalancer) CallObserved() bool { return lb.calls != nil }

// OnRulesChange is adapter.Balancer.OnRulesChange.
func (lb *LoadBalancer) OnRulesChange(fn func()) (stop func()) { return lb.onRulesChange(fn) }

// OnEjectionChange is adapter.Balancer.OnEjectionChange.
func (lb *LoadBalancer) OnEjectionChange(fn func(service string)) (stop func()) {
	return lb.onEjectionChange(fn)
}

// Policy is the LoadBalancer's load-balancing policy.
func (lb *LoadBalancer) Policy() Policy { return lb.policy }

// Cache is adapter.Balancer.Cache.
func (lb *LoadBalancer) Cache() *Cache { return lb.cache }

// GrayHeader is the name of the request's gray key.
func (lb *LoadBalancer) GrayHeader() string { return lb.gray.header }

// VersionHeader is the name of the request's version key.
func (lb *LoadBalancer) VersionHeader() string { return lb.versionHeader() }

// VersionMetadataKey is the instance metadata key of the LoadBalancer's
// VersionFilter (the last one, as for its request key), DefaultVersionKey
// when it has none.
func (lb *LoadBalancer) VersionMetadataKey() string { return lb.versionMeta }

// End ends a call of a request of kind k begun with Candidates.Begin at
// end (on Now's clock) with its answer (retryAfter: an overloaded
// answer's Retry-After, 0 when none).
func End(s *Stats, start, end int64, k Kind, a Answer, retryAfter time.Duration) {
	started{stats: s, start: start, kind: k}.endAt(end, a, retryAfter)
}

// Discard ends a call begun with Candidates.Begin without a result.
func Discard(s *Stats) { started{stats: s}.Discard() }

// Now is a call's start time on the clock Done measures with.
func Now() int64 { return monoNow() }

// At is t on Now's clock.
func At(t time.Time) int64 { return int64(t.Sub(epoch)) }

// Route runs the router's chain for the request in ctx.
func (r Router) Route(ctx context.Context, call ContextHandler) (Decision, Candidates, error) {
	rt, err := r.r.routeWith(ctx, call)
	d, c := decisionOf(rt)
	return d, c, err
}

// Instances returns the candidates (nil when none). The slice is shared.
func (c Candidates) Instances() []Instance {
	if c.n == nil {
		return nil
	}
	return c.n.instances
}

// Picker returns the policy's picker over the candidates (nil when none):
// the Picker the Router's Policy made for them, unless that Policy is the
// round robin (whose turns the leaf keeps itself). Package adapter's
// Endpoints reads its own leaves' pickers this way.
func (c Candidates) Picker() Picker {
	if c.n == nil {
		return nil
	}
	return c.n.pickerOf()
}

// Next picks one candidate with the policy: its index in Instances. Call
// it only when there are candidates.
func (c Candidates) Next() int { return c.n.next() }

// Begin counts a call to candidate i in flight and returns its Stats and
// start (nil and 0 when none are kept).
func (c Candidates) Begin(i int) (*Stats, int64) {
	st := c.n.statsOf()
	if st == nil {
		return nil, 0
	}
	s := st[i]
	return s, s.begin()
}
