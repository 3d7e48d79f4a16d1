package graylbkratos

import (
	"context"

	"github.com/graylb/graylb"
)

// This file is the package's one door into the LoadBalancer beyond the
// user's API (graylb.New, Pick, Keys, the options): every routing call the
// selector and the middleware make goes through the names below, so that
// the package follows the integration surface adapters are written
// against in one place.

type (
	router      = graylb.Router
	route       = graylb.Route
	call        = graylb.Call
	lbPolicy    = graylb.Policy
	statsPolicy = graylb.StatsPolicy
	lbPicker    = graylb.Picker
	lbStats     = graylb.Stats
)

// newRouter builds a routing snapshot of service over list with policy,
// under the rules in force.
func newRouter(lb *graylb.LoadBalancer, service string, list []graylb.Instance, p lbPolicy) (*router, error) {
	return lb.NewRouter(service, list, p)
}

// routeCall runs r's routing for the call in ctx, whose own keys h reads.
func routeCall(ctx context.Context, r *router, h graylb.ContextHandler) (route, error) {
	return r.RouteWith(ctx, h)
}

// policyOf is lb's load-balancing policy.
func policyOf(lb *graylb.LoadBalancer) lbPolicy { return lb.Policy() }

// kindToPass is the kind of the call in ctx and whether it must be written
// on the outgoing call for the next hop to route the same way.
func kindToPass(ctx context.Context, lb *graylb.LoadBalancer, h graylb.ContextHandler) (graylb.Kind, bool) {
	return lb.KindToPassWith(ctx, h)
}

// laneToPass is the lane a match rule gives the call in ctx, to be written
// under the version key ("" when none).
func laneToPass(ctx context.Context, lb *graylb.LoadBalancer, h graylb.ContextHandler) string {
	return lb.LaneToPassWith(ctx, h)
}

// matchKeys are the request keys the match rules in force name.
func matchKeys(lb *graylb.LoadBalancer) []string { return lb.MatchKeys() }

// onRoutingChange calls fn after every change that a routing snapshot
// does not follow by itself: rules, ejections and readmissions.
func onRoutingChange(lb *graylb.LoadBalancer, fn func()) (stop func()) {
	stopRules := lb.OnRulesChange(fn)
	stopEject := lb.OnEjectionChange(func(string) { fn() })
	return func() { stopRules(); stopEject() }
}

// untrusted marks ctx as serving a caller outside the trust boundary.
func untrusted(ctx context.Context) context.Context { return graylb.WithUntrustedCaller(ctx) }
