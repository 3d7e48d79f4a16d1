package adapter

import (
	"context"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
)

// Balancer is a LoadBalancer as an adapter uses it, obtained with For. It
// is safe for concurrent use and never changes. It is a view of the
// LoadBalancer, not a copy: a *Balancer is the *graylb.LoadBalancer it
// was made from, converted, so For costs nothing.
type Balancer engine.LoadBalancer

// For returns the adapter surface of lb, nil when lb is nil. It allocates
// nothing, so code that is handed a LoadBalancer per call may call For each
// time.
func For(lb *graylb.LoadBalancer) *Balancer { return (*Balancer)(lb) }

// e is the engine b is a view of.
func (b *Balancer) e() *engine.LoadBalancer { return (*engine.LoadBalancer)(b) }

// CallObserved reports whether the LoadBalancer has a graylb.CallObserver
// (graylb.WithCallObserver): an adapter that reports calls only when
// something reads their results must then report every call, through
// Route.Call and Call.End (Call.Tracked says so per call).
func (b *Balancer) CallObserved() bool { return b != nil && b.e().CallObserved() }

// LoadBalancer returns the LoadBalancer b is the surface of.
func (b *Balancer) LoadBalancer() *graylb.LoadBalancer { return (*graylb.LoadBalancer)(b) }

// Keys returns the names of the request values the LoadBalancer reads
// (graylb.LoadBalancer.Keys): what an adapter reads, propagates, drops at
// a trust boundary and writes. A nil Balancer has the default names.
func (b *Balancer) Keys() graylb.Keys {
	if b == nil {
		return graylb.DefaultKeys()
	}
	return b.e().Keys()
}

// VersionMetadataKey returns the instance metadata key under which the
// LoadBalancer's VersionFilter reads an instance's version
// (filter.WithVersionKey), graylb.DefaultVersionKey when the LoadBalancer
// has no VersionFilter or b is nil. It is fixed when the LoadBalancer is
// made. An adapter handed an instance's version apart from its metadata
// (a Kratos node's Version) puts it in the instance's metadata under this
// key for version routing to see it. The request key is Keys().Version.
func (b *Balancer) VersionMetadataKey() string {
	if b == nil {
		return graylb.DefaultVersionKey
	}
	return b.e().VersionMetadataKey()
}

// MatchKeys returns the request keys named by the match rules in force, in
// lower case (nil when none). Rules change at run time: read it per request.
// The slice is shared: do not modify it. A nil Balancer has none.
func (b *Balancer) MatchKeys() []string {
	if b == nil {
		return nil
	}
	return b.e().MatchKeys()
}

// Decide returns the decision for the request in ctx, whose call's keys
// call reads (nil: the LoadBalancer's ContextHandlers alone): its kind under
// the rules in force, what decided it, and the lane a match rule gives it
// when the call carries no version. Outcome is left Selected: it is what a
// pick did, and Decide picks nothing. Route decides the same way.
func (b *Balancer) Decide(ctx context.Context, call graylb.ContextHandler) Decision {
	return Decision(b.e().Decide(ctx, call))
}

// Route runs the chain for the request in ctx to service: it decides the
// request's kind (reading the call's keys through call first, then the
// LoadBalancer's ContextHandlers; a ContextHandler equal to call is not
// asked twice) and returns the candidates. It does not block once the
// service is routed; the first call for a service waits for its list.
// call must be safe for concurrent use and should not allocate.
//
// Errors wrap graylb.ErrNoInstance (the Route still carries the decision),
// graylb.ErrInvalidService, graylb.ErrUnknownService or graylb.ErrClosed.
func (b *Balancer) Route(ctx context.Context, service string, call graylb.ContextHandler) (Route, error) {
	d, c, err := b.e().Route(ctx, service, call)
	return Route{Decision: Decision(d), Service: service, b: b, c: c}, err
}

// Reroute returns the route of a retry of the request in ctx, first routed
// as first, after its tries of the instances tried reports failed (a
// refused or lost connection): the candidates the request would have had
// if those instances were not usable. A retry keeps first's decision. A
// gray request whose every gray instance was tried falls back to prod; a
// prod request never reaches gray; a kind left with no untried instance
// fails with a *graylb.NoInstanceError. The candidates may include tried
// instances: pick with Route.NextUntried.
func (b *Balancer) Reroute(ctx context.Context, first Route, tried func(graylb.Instance) bool, call graylb.ContextHandler) (Route, error) {
	d, c, err := b.e().Reroute(ctx, first.Service, engine.Decision(first.Decision), first.c, tried, call)
	return Route{Decision: Decision(d), Service: first.Service, b: b, c: c}, err
}

// NewRouter builds a Router for service over list (its usable instances
// with a valid host and port are kept) with the LoadBalancer's policy
// under the rules in force: for an adapter that is handed instances
// rather than reading them from the LoadBalancer's Cache. An adapter that
// is handed endpoints of its own (connections, a framework's nodes) routes
// over them with NewEndpoints.
func (b *Balancer) NewRouter(service string, list []graylb.Instance) (*Router, error) {
	r, err := b.e().NewRouter(service, list, nil)
	if err != nil {
		return nil, err
	}
	return &Router{b: b, service: service, r: r}, nil
}

// Report reports the result of a call to inst of service made without a
// Call (a connection that failed before any call, say): ok is false for a
// failure that counts against the instance, latency is the call's duration
// (0 when unknown). It does nothing when the LoadBalancer keeps no Stats or
// does not know the instance.
func (b *Balancer) Report(service string, inst graylb.Instance, ok bool, latency time.Duration) {
	b.e().Report(service, inst, ok, latency)
}

// OnRulesChange calls fn after each accepted rules change, once the
// LoadBalancer's own routing follows it, until stop is called: an adapter
// that keeps routing of its own (Routers) rebuilds it there, off the pick
// path. fn must not block.
func (b *Balancer) OnRulesChange(fn func()) (stop func()) { return b.e().OnRulesChange(fn) }

// OnEjectionChange calls fn with a service's name after an ejection or a
// readmission changed which of its instances are usable, once the
// LoadBalancer's own routing follows it, until stop is called. fn must not
// block.
func (b *Balancer) OnEjectionChange(fn func(service string)) (stop func()) {
	return b.e().OnEjectionChange(fn)
}

// Cache returns the Cache the LoadBalancer reads instances from: for an
// adapter that follows the same lists (a resolver) and for its Stats.
func (b *Balancer) Cache() *graylb.Cache { return b.e().Cache() }
