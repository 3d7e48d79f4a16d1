package adapter

import (
	"context"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
)

// Decision is a request's routing decision, made once per request: its
// kind, what decided it, what the gray decision did, and the lane (a
// version) a match rule gave it ("" when none).
type Decision struct {
	Kind graylb.Kind
	// Source is what decided Kind: Balancer.Stamp writes Kind on the
	// outgoing call, canonical, unless Source is FromDefault.
	Source  KindSource
	Outcome graylb.Outcome
	Lane    string
}

// Route is the result of routing one request: its Decision and the
// candidates to pick from. It is a small value; copying it allocates
// nothing. The zero Route has no candidates.
type Route struct {
	Decision
	Service string // the service routed
	b       *Balancer
	c       engine.Candidates
}

// Instances returns the candidates. The slice is shared: do not modify it.
func (r Route) Instances() []graylb.Instance {
	return r.c.Instances()
}

// Len returns the number of candidates.
func (r Route) Len() int { return len(r.Instances()) }

// NextIndex picks one candidate with the policy and returns its index in
// Instances (0 when the route has none).
func (r Route) NextIndex() int {
	if len(r.c.Instances()) == 0 {
		return 0
	}
	return r.c.Next()
}

// Next picks one candidate with the policy: the zero Instance when the
// route has none.
func (r Route) Next() graylb.Instance {
	list := r.Instances()
	if len(list) == 0 {
		return graylb.Instance{}
	}
	return list[r.c.Next()]
}

// NextUntried picks a candidate with the policy, as NextIndex does, and
// when tried reports it, takes the next candidate after it that tried does
// not report; false when tried reports every candidate.
func (r Route) NextUntried(tried func(graylb.Instance) bool) (int, bool) {
	list := r.Instances()
	n := len(list)
	if n == 0 {
		return 0, false
	}
	start := r.c.Next()
	if tried == nil {
		return start, true
	}
	for k := 0; k < n; k++ {
		if i := (start + k) % n; !tried(list[i]) {
			return i, true
		}
	}
	return 0, false
}

// Start picks one candidate with the policy and starts a call to it:
// r.Call(r.NextIndex()).
func (r Route) Start() Call { return r.Call(r.NextIndex()) }

// Call starts a call to candidate i of Instances: it counts the call in
// flight until Call.End, which reports its result to the instance's Stats
// (outlier detection, latency-aware policies) and the LoadBalancer's
// graylb.CallObserver. An index out of range gives the zero Call.
func (r Route) Call(i int) Call {
	list := r.Instances()
	if i < 0 || i >= len(list) {
		return Call{}
	}
	c := Call{Instance: list[i], Service: r.Service, Kind: r.Kind, b: r.b}
	c.stats, c.start = r.c.Begin(i)
	if r.b != nil && r.b.e().CallObserved() {
		c.served = r.Kind
		if r.Outcome == graylb.FellBack {
			c.served = graylb.Prod
		}
		if c.stats == nil {
			c.start = engine.Now()
		}
	}
	return c
}

// Router is a routing snapshot of one service over an explicit instance
// list (Balancer.NewRouter). It is immutable and safe for concurrent use;
// it does not follow rule or ejection changes: build a new one when
// Balancer.OnRulesChange or OnEjectionChange says so.
type Router struct {
	b       *Balancer
	service string
	r       engine.Router
}

// Route runs the chain for the request in ctx over the Router's list, as
// Balancer.Route does over the LoadBalancer's. It does not block.
func (r *Router) Route(ctx context.Context, call graylb.ContextHandler) (Route, error) {
	d, c, err := r.r.Route(ctx, call)
	return Route{Decision: Decision(d), Service: r.service, b: r.b, c: c}, err
}
