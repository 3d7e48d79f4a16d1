package adapter

import (
	"context"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
	"github.com/graylb/graylb/policy"
)

// Decision is a request's routing decision, made once per request: its
// kind, what decided it, what the gray decision did, and the lane (a
// version) a match rule gave it ("" when none).
type Decision struct {
	Kind graylb.Kind
	// Source is what decided Kind: when !Source.Travels() the adapter
	// writes Kind on the outgoing call (see Balancer.Pass).
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

// Picker returns the policy's picker over the candidates (nil when there
// are none): for an adapter that picks among something other than the
// instances themselves, such as connections, with a Policy of its own
// passed to NewRouter.
func (r Route) Picker() policy.Picker {
	return r.c.Picker()
}

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
// flight until Call.Done or Call.Discard, which report its outcome to the
// instance's Stats (outlier detection, latency-aware policies). An index
// out of range gives the zero Call.
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

// Call is one call to a candidate of a Route, from Route.Call to Done: the
// service, the instance and the request's kind it was made for, which a
// report of its outcome carries. It is a small value: passing it around
// does not allocate. The zero Call is valid and Done on it does nothing.
type Call struct {
	Instance graylb.Instance
	Service  string
	Kind     graylb.Kind
	served   graylb.Kind // the kind of the instances that serve it, for a graylb.CallObserver
	b        *Balancer
	stats    *policy.Stats
	start    int64 // on graylb's monotonic clock; 0 when neither Stats nor a CallObserver are kept
}

// Done reports the call's outcome: ok is false for a failure that counts
// against the instance (a connection failure, a 5xx answer, gRPC
// Unavailable; the adapter decides). It ends the call's in-flight count,
// feeds its latency to the instance's estimate and, with outlier
// detection, its success or failure to the ejection rule, and the call to
// the LoadBalancer's graylb.CallObserver (WithCallObserver). Call Done or
// Discard exactly once per call.
func (c Call) Done(ok bool) {
	switch {
	case c.b != nil && c.b.e().CallObserved():
		c.b.e().DoneObserved(c.Service, c.Instance, c.served, c.stats, c.start, ok, ok)
	case c.stats != nil:
		engine.Done(c.stats, c.start, ok)
	}
}

// TimedOut ends a call whose caller's deadline passed before it ended. The
// call is told to the LoadBalancer's graylb.CallObserver as failed, with
// its duration: its caller saw it fail, and a build that hangs must show
// in the call metrics. To the instance's Stats (outlier detection, latency
// estimates) it is Done(true) when answered is true (the instance
// answered, as a gRPC DeadlineExceeded status the server sent is an
// answer: its latency feeds the estimate and it does not count toward
// ejection), else Done(false): an instance that did not answer in time
// failed the call, which counts toward its ejection with a latency of at
// least the time waited (an instance that hangs, or answers only after the
// deadline, is ejected and avoided). Call it instead of Done or Discard.
func (c Call) TimedOut(answered bool) {
	if c.b == nil {
		return
	}
	switch {
	case c.b.e().CallObserved():
		c.b.e().DoneObserved(c.Service, c.Instance, c.served, c.stats, c.start, answered, false)
	case c.stats != nil:
		engine.Done(c.stats, c.start, answered)
	}
}

// Discard ends the call without an outcome, for a call that says nothing
// of the instance (the caller cancelled it).
func (c Call) Discard() {
	if c.stats == nil {
		return
	}
	engine.Discard(c.stats)
}

// Stats returns the instance's Stats (nil when the LoadBalancer keeps
// none: no outlier detection and a policy that reads none).
func (c Call) Stats() *policy.Stats { return c.stats }

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

// Pass is what an adapter writes on the outgoing call for the next hop to
// route the same way: each pair whose key is not "" (see Balancer.Pass).
type Pass struct {
	GrayKey, Gray       string // the gray key and "true" or "false"
	VersionKey, Version string // the version key and the lane
}

// Pass returns the pairs to write on the outgoing call for d: the gray key
// with d's kind when !d.Source.Travels() (rules, a context value or the
// caller's own flag decided it) or the caller is untrusted (its side is
// settled here, whatever decided it); the version key with d.Lane when a
// match rule gave a lane. A key the call already carries travels as it is:
// the adapter writes Version only when the outgoing call has no version of
// its own, and passes the incoming keys on unchanged otherwise.
func (b *Balancer) Pass(d Decision, untrusted bool) Pass {
	var p Pass
	if !d.Source.Travels() || untrusted {
		p.GrayKey, p.Gray = b.e().GrayHeader(), "false"
		if d.Kind == graylb.Gray {
			p.Gray = "true"
		}
	}
	if d.Lane != "" {
		p.VersionKey, p.Version = b.e().VersionHeader(), d.Lane
	}
	return p
}

// PassFor returns the pairs to write on an outgoing call made with ctx that
// has no Route of its own (a client interceptor that runs before a
// balancer picks, whose call's keys call reads): what Pass gives for
// Decide's decision and the caller's trust, from one decision that reads
// each key once. When nothing but a key could decide
// the kind it reads none of the call's keys. Keys are as configured: an
// adapter whose metadata keys are lower case lowers them.
func (b *Balancer) PassFor(ctx context.Context, call graylb.ContextHandler) Pass {
	var p Pass
	kind, write, lane := b.e().PassWith(ctx, call)
	if lane != "" {
		p.VersionKey, p.Version = b.e().VersionHeader(), lane
	}
	if write {
		p.GrayKey, p.Gray = b.e().GrayHeader(), "false"
		if kind == graylb.Gray {
			p.Gray = "true"
		}
	}
	return p
}
