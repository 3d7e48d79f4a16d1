package engine

import "context"

// reroute returns the route of a retry of the request in ctx, first routed
// as first, after its tries of the instances tried reports failed (a
// refused or lost connection): the candidates the request would have had
// if those instances were not usable, as an ejected instance is not. So,
// under the gray rule:
//   - a gray request whose every gray instance was tried falls back to
//     prod (Outcome FellBack), as a gray request does when the service has
//     no gray instance;
//   - a prod request never reaches a gray instance;
//   - a kind left with no untried instance fails with a *NoInstanceError.
//
// A retry keeps first's decision: its kind, what decided it and its lane
// (a canary draw or a match rule is not made again), under the rules in
// force. The Observer is told of the retry's outcome, as of any pick.
//
// The returned candidates may include tried instances: pick with
// routing.NextUntried. They are first's while first's still hold an untried
// instance and the service's routing is the one first was built from (no
// list, rule or ejection change since); a gray request whose every gray
// instance, and no prod one, was tried gets the prod side of the routing
// in force; any other request gets routing built for the call over the
// untried instances (O(n) in the instances, with allocations: the path of
// a retry, not of every request). So a retry never reaches an instance
// that became gray after the first try (a rule naming its address, its
// metadata), nor one ejected since.
func (lb *LoadBalancer) reroute(ctx context.Context, service string, first routing, tried func(Instance) bool) (routing, error) {
	return lb.rerouteWith(ctx, service, first, tried, nil)
}

// rerouteWith is reroute for an adapter that reads the keys of the call it
// routes (see routeWith; package adapter's Balancer.Reroute): the retry's filters read them as the
// first route's did.
func (lb *LoadBalancer) rerouteWith(ctx context.Context, service string, first routing, tried func(Instance) bool, call ContextHandler) (routing, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if tried == nil {
		tried = func(Instance) bool { return false }
	}
	d := decision{kind: first.Kind, source: first.Source, outcome: first.Outcome, lane: first.Lane}
	s := lb.services.Load().get(service)
	if s != nil && first.leaf != nil && s.tree.Load().holds(first.leaf) && first.hasUntried(tried) {
		// The routing first was built from is still in force: its
		// candidates are the retry's.
		lb.observe(service, d)
		return first, nil
	}
	if s == nil || s.unlisted {
		d.outcome = Failed
		lb.observe(service, d)
		return routing{Kind: d.kind, Source: d.source, Outcome: Failed, Lane: d.lane}, &NoInstanceError{Service: service, Kind: d.kind}
	}
	var r Request
	r.init(ctx, service, lb.handlerFor(call), valuesIn(ctx))
	r.call = call
	r.lane = d.lane
	t := s.tree.Load()
	var idx int
	var outcome Outcome
	if i, _ := t.gray.place(d.kind); i == grayIdxGray && allTried(t.children[grayIdxGray].instances, tried) && !anyTried(t.children[grayIdxProd].instances, tried) {
		// What is left is exactly the prod side: a tree built over it
		// would route this request to every instance (no gray one is
		// left), through the same filters over the same list.
		idx, outcome = grayIdxProd, FellBack
	} else {
		built, err := lb.untriedTree(s, tried)
		if err != nil {
			return routing{Kind: d.kind, Source: d.source, Outcome: Failed, Lane: d.lane}, err
		}
		t = built
		idx, outcome = t.gray.place(d.kind)
	}
	if stateIn(ctx).IsShadow() && idx != grayIdxGray {
		idx = grayIdxNone // a shadow copy never falls back to prod
	}
	d.outcome = outcome
	var n *node
	if idx != grayIdxNone {
		n = walk(t.children[idx], &r)
	}
	rt := routing{Kind: d.kind, Source: d.source, Outcome: outcome, Lane: d.lane, leaf: n}
	if n == nil || !rt.hasUntried(tried) {
		d.outcome = Failed
		lb.observe(service, d)
		rt.Outcome, rt.leaf = Failed, nil
		return rt, t.noInstance(d.kind)
	}
	lb.observe(service, d)
	return rt, nil
}

// NextUntried picks a candidate with the policy, as NextIndex does, and
// when tried reports it, takes the next candidate after it that tried does
// not report; false when tried reports every candidate.
func (r routing) NextUntried(tried func(Instance) bool) (int, bool) {
	n := r.Len()
	if n == 0 {
		return 0, false
	}
	start := r.leaf.next()
	if tried == nil {
		return start, true
	}
	for k := 0; k < n; k++ {
		if i := (start + k) % n; !tried(r.leaf.instances[i]) {
			return i, true
		}
	}
	return 0, false
}

// hasUntried reports whether a candidate is not reported by tried.
func (r routing) hasUntried(tried func(Instance) bool) bool {
	for _, in := range r.Instances() {
		if !tried(in) {
			return true
		}
	}
	return false
}

func (lb *LoadBalancer) observe(service string, d decision) {
	if lb.observer != nil {
		lb.observer(service, d.kind, d.outcome)
	}
}

// untriedTree builds s's routing over its usable instances that tried does
// not report, with the LoadBalancer's filters, rules, policy and outlier
// state.
func (lb *LoadBalancer) untriedTree(s *service, tried func(Instance) bool) (*tree, error) {
	s.mu.Lock()
	list := s.list
	s.mu.Unlock()
	keep := make([]Instance, 0, len(list))
	for _, in := range list {
		if in.Usable() && !tried(in) {
			keep = append(keep, in)
		}
	}
	lists := liveLists{keep, keep}
	var ejected [2]int
	var stats statsFunc
	if h := s.health; h != nil {
		lists, ejected = h.live(keep)
		stats = h.statsOf
	}
	t, err := buildLive(s.name, lists, &lb.gray, lb.filters, lb.rules.Load(), lb.policy, stats)
	if err != nil {
		return nil, err
	}
	t.ejected = ejected
	return t, nil
}

// place is where the gray decision puts a request whose kind was decided
// already: the subset index and the outcome, under s's rules and instances
// (decide's precedence, without deciding the kind again).
func (s *grayDecision) place(k Kind) (int, Outcome) {
	rl := s.rules
	switch {
	case rl.closed && k == Gray:
		return grayIdxProd, FellBack
	case rl.closed:
		return grayIdxProd, Selected
	case !rl.enabled:
		return grayIdxAll, Bypassed
	case k == Prod:
		return grayIdxProd, Selected
	case s.hasGray:
		return grayIdxGray, Selected
	}
	return grayIdxAll, FellBack
}

// walk runs the user's filters from n for r and returns the leaf, nil when
// a stage chose no subset or the leaf is empty (tree.route's walk).
func walk(n *node, r *Request) *node {
	for !n.isLeaf() {
		e := n.ext
		i := e.stage.Choose(*r)
		if i < 0 || i >= len(e.children) {
			return nil
		}
		n = &e.children[i]
	}
	if len(n.instances) == 0 {
		return nil
	}
	return n
}

func allTried(list []Instance, tried func(Instance) bool) bool {
	for _, in := range list {
		if !tried(in) {
			return false
		}
	}
	return true
}

func anyTried(list []Instance, tried func(Instance) bool) bool {
	for _, in := range list {
		if tried(in) {
			return true
		}
	}
	return false
}
