package adapter

import (
	"context"
	"errors"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
	"github.com/graylb/graylb/policy"
)

// Endpoint is one of an adapter's own endpoints: the instance it reaches
// and the transport's handle to it (a gRPC SubConn, a framework's node).
type Endpoint[H any] struct {
	Instance graylb.Instance
	Handle   H
}

// Endpoints is a routing snapshot of one service over an adapter's own
// endpoints (NewEndpoints): the LoadBalancer's routing (the gray rule,
// its rules and filters, outlier ejection) decides the candidates, and its
// policy (round robin, weighted, random, P2C with its Stats) picks among
// those that are usable, yielding the picked endpoint's handle. It is
// immutable and safe for concurrent use. It follows neither rule and
// ejection changes nor changes of the endpoints or of their usability:
// build a new one when Balancer.OnRulesChange or OnEjectionChange says so
// or the endpoints change.
type Endpoints[H any] struct {
	b       *Balancer
	service string
	r       engine.Router
}

// errNoBalancer is the error of NewEndpoints without a Balancer.
var errNoBalancer = errors.New("adapter: no LoadBalancer")

// NewEndpoints builds the routing of service over list with b's rules,
// filters, ejections and policy in force. An endpoint whose instance
// graylb would not route (unhealthy, disabled, weight 0, an invalid host
// or port) or whose address (Instance.Addr) an earlier one has is left
// out.
//
// usable (nil: every endpoint is) is asked once per endpoint, here, whether
// a call can be sent to it now (a READY connection). An endpoint that is
// not usable stays a candidate: routing decides as if it were, and a
// request whose candidates are all unusable is not sent to other
// instances (EndpointRoute.Next says none is usable, and the adapter
// waits or fails). To route around endpoints that will not become usable
// (a connection that failed), leave them out of list.
func NewEndpoints[H any](b *Balancer, service string, list []Endpoint[H], usable func(H) bool) (*Endpoints[H], error) {
	if b == nil {
		return nil, errNoBalancer
	}
	p := &endpointPolicy[H]{inner: b.e().Policy(), index: make(map[string]int, len(list)),
		handles: make([]H, 0, len(list)), usable: make([]bool, 0, len(list))}
	insts := make([]graylb.Instance, 0, len(list))
	for _, ep := range list {
		a := ep.Instance.Addr()
		if _, dup := p.index[a]; dup {
			continue
		}
		p.index[a] = len(p.handles)
		p.handles = append(p.handles, ep.Handle)
		p.usable = append(p.usable, usable == nil || usable(ep.Handle))
		insts = append(insts, ep.Instance)
	}
	r, err := b.e().NewRouter(service, insts, p)
	if err != nil {
		return nil, err
	}
	return &Endpoints[H]{b: b, service: service, r: r}, nil
}

// Route runs the chain for the request in ctx over the endpoints, as
// Balancer.Route does over the LoadBalancer's instances; call reads the
// call's own keys (nil: none). It does not block and, on a stable list,
// allocates nothing. Errors wrap graylb.ErrNoInstance: the request's kind
// has no endpoint (the route still carries the decision).
func (e *Endpoints[H]) Route(ctx context.Context, call graylb.ContextHandler) (EndpointRoute[H], error) {
	d, c, err := e.r.Route(ctx, call)
	rt := EndpointRoute[H]{Decision: Decision(d), Service: e.service, b: e.b, c: c}
	rt.leaf, _ = c.Picker().(*endpointLeaf[H])
	return rt, err
}

// EndpointRoute is the result of routing one request over Endpoints: its
// Decision and its candidate endpoints. It is a small value; copying it
// allocates nothing. The zero EndpointRoute has no candidates.
type EndpointRoute[H any] struct {
	Decision
	Service string // the service routed
	b       *Balancer
	c       engine.Candidates
	leaf    *endpointLeaf[H] // nil when there are no candidates
}

// route is r as a Route over the same candidates.
func (r EndpointRoute[H]) route() Route {
	return Route{Decision: r.Decision, Service: r.Service, b: r.b, c: r.c}
}

// Len returns the number of candidates, usable or not.
func (r EndpointRoute[H]) Len() int {
	if r.leaf == nil {
		return 0
	}
	return len(r.leaf.handles)
}

// Instances returns the candidates' instances, in the order of Handles.
// The slice is shared: do not modify it.
func (r EndpointRoute[H]) Instances() []graylb.Instance {
	if r.leaf == nil {
		return nil
	}
	return r.c.Instances()
}

// Handles returns the candidates' handles, usable or not, in the order of
// Instances. The slice is shared: do not modify it.
func (r EndpointRoute[H]) Handles() []H {
	if r.leaf == nil {
		return nil
	}
	return r.leaf.handles
}

// Next picks a usable candidate with the LoadBalancer's policy and
// returns its index in Handles; false when no candidate is usable.
func (r EndpointRoute[H]) Next() (int, bool) {
	if r.leaf == nil || r.leaf.inner == nil {
		return 0, false
	}
	return r.leaf.Next(), true
}

// Call starts a call to candidate i of Handles (see Route.Call): end it
// with Call.End. An index out of range gives the zero Call.
func (r EndpointRoute[H]) Call(i int) Call {
	if i < 0 || i >= r.Len() {
		return Call{}
	}
	return r.route().Call(i)
}

// Start picks a usable candidate with the policy and starts a call to it:
// its handle and the Call; false, with the zero handle and Call, when no
// candidate is usable.
func (r EndpointRoute[H]) Start() (H, Call, bool) {
	i, ok := r.Next()
	if !ok {
		var zero H
		return zero, Call{}, false
	}
	return r.leaf.handles[i], r.route().Call(i), true
}

// endpointPolicy is the Policy an Endpoints' routing tree is built with:
// at each leaf, the LoadBalancer's policy over the leaf's usable
// endpoints, and the leaf's handles.
type endpointPolicy[H any] struct {
	inner   policy.Policy
	index   map[string]int // by Instance.Addr: the endpoint's index in handles
	handles []H
	usable  []bool
}

func (p *endpointPolicy[H]) NewPicker(list []graylb.Instance) policy.Picker {
	return p.NewStatsPicker(list, nil)
}

// NewStatsPicker is NewPicker over instances whose Stats the LoadBalancer
// keeps: a latency-aware policy reads those of the usable endpoints.
func (p *endpointPolicy[H]) NewStatsPicker(list []graylb.Instance, stats []*policy.Stats) policy.Picker {
	l := &endpointLeaf[H]{handles: make([]H, len(list))}
	var up []graylb.Instance
	var upStats []*policy.Stats
	for i, in := range list {
		k, ok := p.index[in.Addr()]
		if !ok {
			continue // an instance no endpoint has (routing makes none up): the zero handle, never picked
		}
		l.handles[i] = p.handles[k]
		if !p.usable[k] {
			continue
		}
		l.usable = append(l.usable, i)
		up = append(up, in)
		if stats != nil {
			upStats = append(upStats, stats[i])
		}
	}
	if len(up) == 0 {
		return l
	}
	if sp, ok := p.inner.(policy.StatsPolicy); ok && stats != nil {
		l.inner = sp.NewStatsPicker(up, upStats)
	} else {
		l.inner = p.inner.NewPicker(up)
	}
	return l
}

// endpointLeaf is the picker of one leaf of an Endpoints' routing tree:
// the leaf's handles, and the policy's picker over its usable ones.
type endpointLeaf[H any] struct {
	handles []H
	usable  []int         // the index in handles of each usable endpoint
	inner   policy.Picker // over the usable endpoints; nil when none is
}

// Next returns the index in handles of a usable endpoint the policy
// picked (0 when none is usable).
func (l *endpointLeaf[H]) Next() int {
	if l.inner == nil {
		return 0
	}
	return l.usable[l.inner.Next()]
}

var _ policy.StatsPolicy = (*endpointPolicy[struct{}])(nil)
