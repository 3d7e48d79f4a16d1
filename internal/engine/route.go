package engine

import "context"

// routing is the result of running the chain for one request (package
// adapter's Route is its adapter-facing form): its kind, what
// the gray decision did, and the candidates to pick from.
type routing struct {
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

// Instances returns the candidates. The slice is shared: do not modify it.
func (r routing) Instances() []Instance {
	if r.leaf == nil {
		return nil
	}
	return r.leaf.instances
}

// Len returns the number of candidates.
func (r routing) Len() int {
	if r.leaf == nil {
		return 0
	}
	return len(r.leaf.instances)
}

// Next picks one candidate with the policy. It returns the zero Instance
// when the route has none.
func (r routing) Next() Instance {
	if r.Len() == 0 {
		return Instance{}
	}
	return r.leaf.instances[r.leaf.next()]
}

// NextIndex picks one candidate with the policy and returns its index in
// Instances (0 when the route has none).
func (r routing) NextIndex() int {
	if r.Len() == 0 {
		return 0
	}
	return r.leaf.next()
}

// Start picks one candidate with the policy and starts a call to it:
// r.Call(r.NextIndex()).
func (r routing) Start() started { return r.Call(r.NextIndex()) }

// Call starts a call to candidate i of Instances: it counts the call in
// flight until started.Done or started.Discard, which report its result to the
// instance's Stats (outlier detection, latency-aware policies). When the
// LoadBalancer keeps no Stats the started call only carries the instance.
// An index out of range gives the zero started.
func (r routing) Call(i int) started {
	if i < 0 || i >= r.Len() {
		return started{}
	}
	c := started{Instance: r.leaf.instances[i], kind: r.Kind}
	if st := r.leaf.statsOf(); st != nil {
		c.stats = st[i]
		c.start = c.stats.begin()
	}
	return c
}

// router is a routing snapshot of one service over an explicit instance
// list, built with a LoadBalancer's filters, rules, handler and observer
// and a policy of the caller's: what the gRPC balancer's picker runs over
// the instances of its connections. It is immutable and safe for
// concurrent use; it does not follow rule changes: build a new one
// (onRulesChange says when). Package adapter's Router wraps it.
type router struct {
	lb      *LoadBalancer
	service string
	tree    *tree
}

// newRouter builds a router for service over list (its usable instances
// with a valid host and port, as the Cache keeps them) with policy, or the LoadBalancer's policy when nil, under the rules in
// force.
func (lb *LoadBalancer) newRouter(service string, list []Instance, policy Policy) (*router, error) {
	if err := ValidateServiceName(service); err != nil {
		return nil, err
	}
	if policy == nil {
		policy = lb.policy
	}
	list = lb.cache.keep(service, list)
	lists := liveLists{list, list}
	var ejected [2]int
	var stats statsFunc
	if h := lb.healthOf(service); h != nil {
		lists, ejected = h.live(list)
		stats = h.statsOf
	}
	t, err := buildLive(service, lists, &lb.gray, lb.filters, lb.rules.Load(), policy, stats)
	if err != nil {
		return nil, err
	}
	t.ejected = ejected
	return &router{lb: lb, service: service, tree: t}, nil
}

// routeReq runs the chain for the request in ctx. It does not block. It
// reads the call's keys through the ContextHandlers alone.
func (r *router) routeReq(ctx context.Context) (routing, error) { return r.routeWith(ctx, nil) }
