package graylb

import "context"

// Route is the result of running the chain for one request: its kind, what
// the gray decision did, and the candidates to pick from.
type Route struct {
	Kind Kind // the request's kind
	// Source is what decided Kind. An adapter writes Kind on the outgoing
	// call when !Source.Travels(), so later hops route the same way.
	Source  KindSource
	Outcome Outcome // what the gray decision did
	// Lane is the version a match rule gave the request ("" when none). An
	// adapter writes it under the version key on the outgoing call when the
	// call carries no version, so later hops take the same lane.
	Lane string
	leaf *node
}

// Picker returns the policy's picker over the candidates (nil when there
// are none): for adapters that pick among something other than the
// instances themselves, such as the gRPC balancer's connections, with a
// Policy of their own passed to NewRouter.
func (r Route) Picker() Picker {
	if r.leaf == nil {
		return nil
	}
	return r.leaf.pickerOf()
}

// Instances returns the candidates. The slice is shared: do not modify it.
func (r Route) Instances() []Instance {
	if r.leaf == nil {
		return nil
	}
	return r.leaf.instances
}

// Len returns the number of candidates.
func (r Route) Len() int {
	if r.leaf == nil {
		return 0
	}
	return len(r.leaf.instances)
}

// Next picks one candidate with the policy. It returns the zero Instance
// when the route has none.
func (r Route) Next() Instance {
	if r.Len() == 0 {
		return Instance{}
	}
	return r.leaf.instances[r.leaf.next()]
}

// NextIndex picks one candidate with the policy and returns its index in
// Instances (0 when the route has none).
func (r Route) NextIndex() int {
	if r.Len() == 0 {
		return 0
	}
	return r.leaf.next()
}

// Start picks one candidate with the policy and starts a call to it:
// Route.Call(Route.NextIndex()).
func (r Route) Start() Call { return r.Call(r.NextIndex()) }

// Call starts a call to candidate i of Instances: it counts the call in
// flight until Call.Done or Call.Discard, which report its result to the
// instance's Stats (outlier detection, latency-aware policies). When the
// LoadBalancer keeps no Stats the Call only carries the instance. An index
// out of range gives the zero Call.
func (r Route) Call(i int) Call {
	if i < 0 || i >= r.Len() {
		return Call{}
	}
	c := Call{Instance: r.leaf.instances[i]}
	if st := r.leaf.statsOf(); st != nil {
		c.stats = st[i]
		c.stats.inflight.Add(1)
		c.start = monoNow()
	}
	return c
}

// Router is a routing snapshot of one service over an explicit instance
// list, built with a LoadBalancer's filters, rules, handler and observer
// and a policy of the caller's: what the gRPC balancer's picker runs over
// the instances of its connections. It is immutable and safe for
// concurrent use; it does not follow rule changes: build a new one
// (OnRulesChange says when).
type Router struct {
	lb      *LoadBalancer
	service string
	tree    *tree
}

// NewRouter builds a Router for service over list (its usable instances
// with a valid host and port, as the Cache keeps them) with policy, or the LoadBalancer's policy when nil, under the rules in
// force.
func (lb *LoadBalancer) NewRouter(service string, list []Instance, policy Policy) (*Router, error) {
	if err := ValidateServiceName(service); err != nil {
		return nil, err
	}
	if policy == nil {
		policy = lb.policy
	}
	list = lb.cache.keep(service, list)
	var ejected [2]int
	var stats statsFunc
	if h := lb.healthOf(service); h != nil {
		list, ejected = h.live(list)
		stats = h.statsOf
	}
	t, err := buildTree(service, list, &lb.gray, lb.filters, lb.rules.Load(), policy, stats)
	if err != nil {
		return nil, err
	}
	t.ejected = ejected
	return &Router{lb: lb, service: service, tree: t}, nil
}

// Route runs the chain for the request in ctx. It does not block. It
// reads the call's keys through the ContextHandlers (an adapter passes its
// own reader to RouteWith).
func (r *Router) Route(ctx context.Context) (Route, error) { return r.RouteWith(ctx, nil) }
