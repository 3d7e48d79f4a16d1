package graylbkratos

import (
	"context"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
)

// This file is the package's one door into graylb's adapter surface
// (package adapter): every routing call the selector and the middleware
// make goes through the names below.

type (
	balancer    = adapter.Balancer
	router      = adapter.Router
	route       = adapter.Route
	call        = adapter.Call
	pass        = adapter.Pass
	admitter    = adapter.Admitter
	admission   = adapter.Admission
	kept        = adapter.Kept
	lbPolicy    = policy.Policy
	statsPolicy = policy.StatsPolicy
	lbPicker    = policy.Picker
	lbStats     = policy.Stats
)

// balancerOf is lb's adapter surface; obtained once per Builder or
// middleware and kept.
func balancerOf(lb *graylb.LoadBalancer) *balancer { return adapter.For(lb) }

// newRouter builds a routing snapshot of service over list with policy,
// under the rules in force.
func newRouter(b *balancer, service string, list []graylb.Instance, p lbPolicy) (*router, error) {
	return b.NewRouter(service, list, p)
}

// routeCall runs r's routing for the call in ctx, whose own keys h reads.
func routeCall(ctx context.Context, r *router, h graylb.ContextHandler) (route, error) {
	return r.Route(ctx, h)
}

// versionKeyOf is the instance metadata key the LoadBalancer's version
// routing reads.
func versionKeyOf(b *balancer) string { return b.VersionMetadataKey() }

// policyOf is the LoadBalancer's load-balancing policy.
func policyOf(b *balancer) lbPolicy { return b.Policy() }

// passFor is what to write on the outgoing call in ctx, whose own keys h
// reads, for the next hop to route the same way: the kind when rules, a
// context value or the caller's own flag decided it (or the caller is
// untrusted), and a lane a match rule gave the call.
func passFor(ctx context.Context, b *balancer, h graylb.ContextHandler) pass {
	return b.PassFor(ctx, h)
}

// onRoutingChange calls fn after every change that a routing snapshot
// does not follow by itself: rules, ejections and readmissions.
func onRoutingChange(b *balancer, fn func()) (stop func()) {
	stopRules := b.OnRulesChange(fn)
	stopEject := b.OnEjectionChange(func(string) { fn() })
	return func() { stopRules(); stopEject() }
}
