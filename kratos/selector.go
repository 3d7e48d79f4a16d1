package graylbkratos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
)

// Builder builds graylb's Selectors for Kratos' clients:
//
//	selector.SetGlobalSelector(graylbkratos.NewBuilder(lb))
//
// Kratos v2's HTTP and gRPC clients take their selector from the global
// one only (a client's own option is a NodeFilter, which graylb's
// Selector honours, see Selector.Select), so set it once, before the
// clients are made.
//
// A Builder follows lb's rule changes and its ejections and readmissions
// (WithOutlierDetection) for every Selector it built, until Close. It is
// safe for concurrent use.
type Builder struct {
	lb   *graylb.LoadBalancer
	ab   *balancer
	gen  atomic.Uint64 // bumped by every change a routing snapshot does not follow
	stop func()
}

// NewBuilder returns a Builder of Selectors that route with lb: the gray
// rule first, then lb's rules, filters (version routing), outlier
// ejection and policy (round robin, weighted, random, P2C), over the nodes
// Kratos' discovery hands each Selector. With a nil lb (graylb.New
// failed) every Select fails with an error wrapping selector.ErrNoAvailable
// that says so.
//
// The request's keys are read from the call's Kratos transport header
// (the client middleware, Client, writes the kind decided for the call
// there) and from the values the server middleware, Server, kept from the
// request being served; then from graylb.WithValue and lb's own flag
// (graylb.WithSelfGray).
//
// Outlier ejection and latency-aware policies follow the instances by
// address through lb: build lb over the Supplier the Discovery reads
// (NewDiscovery), so that lb knows the services the clients call.
func NewBuilder(lb *graylb.LoadBalancer) *Builder {
	b := &Builder{lb: lb, ab: balancerOf(lb), stop: func() {}}
	if b.ab != nil {
		b.stop = onRoutingChange(b.ab, func() { b.gen.Add(1) })
	}
	return b
}

// errNoLoadBalancer is the error of a Builder made without a LoadBalancer.
var errNoLoadBalancer = errors.New("graylbkratos: the Builder has no LoadBalancer")

// Build returns a new Selector.
func (b *Builder) Build() selector.Selector {
	return &Selector{b: b, h: newHandler(b.lb.Keys())}
}

// Close stops following lb's changes: Selectors built before keep routing
// under the rules and ejections in force at Close.
func (b *Builder) Close() { b.stop() }

// Selector picks one of the nodes Kratos applied to it for each call with
// graylb's routing. Apply builds a routing snapshot over the nodes (the
// gray partition, the rules' and filters' subsets, each with its policy's
// picker: package adapter's Endpoints), so Select runs in O(1) in the
// number of nodes and, without NodeFilters, allocates nothing, whatever
// the policy. A change of lb's rules, or an ejection or readmission,
// rebuilds the snapshot at the next Select.
type Selector struct {
	b    *Builder
	h    *handler
	snap atomic.Pointer[snapshot]
	mu   sync.Mutex // Apply and rebuilds
	rr   atomic.Uint32
}

// snapshot is the routing of one node list under one generation of lb's
// rules and ejections.
type snapshot struct {
	gen   uint64
	nodes []selector.Node
	eps   *endpoints // nil when err != nil
	err   error
}

// Apply replaces the node list. The nodes' service is their ServiceName
// (the name the client dialled: discovery:///<name>); a node's instance
// carries its Metadata (the gray and version keys), its Version under the
// metadata key the LoadBalancer's VersionFilter reads (package filter's WithVersionKey,
// "version" by default) when the metadata has none there, and its weight (the Metadata's
// "weight", which NewDiscovery sets to the registry's weight, else
// InitialWeight, else 1).
func (s *Selector) Apply(nodes []selector.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.Store(s.build(nodes))
}

// build makes the snapshot of nodes under the current generation; s.mu is
// held.
func (s *Selector) build(nodes []selector.Node) *snapshot {
	sn := &snapshot{gen: s.b.gen.Load(), nodes: nodes}
	if s.b.ab == nil {
		sn.err = errNoLoadBalancer
		return sn
	}
	if len(nodes) == 0 {
		sn.err = errors.New("no node")
		return sn
	}
	service := nodes[0].ServiceName()
	if service == "" {
		// A client dialled an address, not discovery:///<name>: route over
		// it as a service named by the address.
		service = directService(nodes[0].Address())
	}
	list := make([]nodeEndpoint, 0, len(nodes))
	versionKey := versionKeyOf(s.b.ab)
	for _, n := range nodes {
		if in, ok := instanceOf(service, n, versionKey); ok {
			list = append(list, nodeEndpoint{Instance: in, Handle: n})
		}
	}
	// Of nodes at one address, the first counts (NewEndpoints).
	sn.eps, sn.err = newEndpoints(s.b.ab, service, list)
	return sn
}

// directService names the service of a client that dialled addr: addr,
// with each byte a service name may not hold ('[', ']' and '%' of an IPv6
// address and its zone, say) replaced by '_', at most
// graylb.MaxServiceNameLen bytes.
func directService(addr string) string {
	if graylb.ValidateServiceName(addr) == nil {
		return addr
	}
	b := []byte(addr)
	if len(b) > graylb.MaxServiceNameLen {
		b = b[:graylb.MaxServiceNameLen]
	}
	for i, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`/\?#%[]<>"`+"`", c) >= 0 || c == '.' && i > 0 && b[i-1] == '.' {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// current returns the snapshot to route with, rebuilt when lb changed
// since it was built.
func (s *Selector) current() *snapshot {
	sn := s.snap.Load()
	if sn == nil || sn.gen == s.b.gen.Load() {
		return sn
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn = s.snap.Load(); sn.gen != s.b.gen.Load() {
		sn = s.build(sn.nodes)
		s.snap.Store(sn)
	}
	return sn
}

// Select picks a node for the call in ctx. The call's kind and version
// decide the candidates as graylb's rule says: a prod call never reaches
// a gray node; a gray call reaches the gray nodes, or every node when the
// list has no gray node at all. When none is left, the error wraps both
// selector.ErrNoAvailable (so Kratos answers 503) and graylb.ErrNoInstance
// (naming the service and the kind).
//
// NodeFilters given with the call (a client's http.WithNodeFilter or
// grpc.WithNodeFilter) narrow the candidates graylb's routing left, never
// widen them; they cost what they cost under Kratos' own selectors (a
// copy of the candidates per call), and the pick among what they leave
// is round robin.
//
// done ends the call (call it once, as Kratos' clients do): it counts in
// flight until then, whatever the policy, and its result feeds the node's
// Stats (outlier ejection, P2C's latency) and the LoadBalancer's
// graylb.CallObserver as package adapter's Call.End says. The result is
// read from the call's error (see resultOf, resultOfDone): nil is OK; a
// cancelled call (context.Canceled, Kratos' 499) reports nothing; a call
// past its caller's deadline is DeadlineNoAnswer when the error is
// context.DeadlineExceeded or a gRPC DeadlineExceeded grpc-go made (no
// byte came, or the deadline passed: the node hung or stalled); else the
// HTTP code Kratos maps the error to is read by adapter.HTTPResult, as
// every adapter reads an answer: 504 (an HTTP 504, a gRPC DeadlineExceeded
// status) is DeadlineAnswered, another 5xx but 501 (Unimplemented) is a
// failure of the node, anything else OK. Without Stats and a CallObserver
// done does nothing. An HTTP call made through Client ends when its body
// was read, not at this done (see Client).
func (s *Selector) Select(ctx context.Context, opts ...selector.SelectOption) (selector.Node, selector.DoneFunc, error) {
	sn := s.current()
	if sn == nil {
		return nil, nil, selector.ErrNoAvailable
	}
	if sn.err != nil {
		return nil, nil, fmt.Errorf("%w: %w", selector.ErrNoAvailable, sn.err)
	}
	rt, err := routeCall(ctx, sn.eps, s.h)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", selector.ErrNoAvailable, err)
	}
	var filters []selector.NodeFilter
	if len(opts) > 0 {
		// Kratos' clients pass their NodeFilters (often none) as an
		// option; a pooled SelectOptions keeps reading them allocation-free.
		o := optionsPool.Get().(*selector.SelectOptions)
		*o = selector.SelectOptions{}
		for _, opt := range opts {
			opt(o)
		}
		filters = o.NodeFilters
		*o = selector.SelectOptions{}
		optionsPool.Put(o)
	}
	var j int
	var ok bool
	if len(filters) > 0 {
		if j, ok = s.filtered(ctx, rt.Handles(), filters); !ok {
			return nil, nil, selector.ErrNoAvailable
		}
	} else if j, ok = rt.Next(); !ok {
		return nil, nil, fmt.Errorf("%w: %w", selector.ErrNoAvailable, graylb.ErrNoInstance)
	}
	node := rt.Handles()[j]
	p, _ := selector.FromPeerContext(ctx)
	c := rt.Call(j)
	if !c.Tracked() {
		if p != nil {
			p.Node = node
		}
		return node, noDone, nil
	}
	d := newCallDone(c)
	if p != nil {
		if prev, ok := p.Node.(*callDone); ok { // a retry inside Client: the previous try is over
			prev.bodyRead(ctx, nil)
			p.Node = awaitingBody{}
		}
		if _, ok := p.Node.(awaitingBody); ok {
			// Client ends the call once Kratos' HTTP client has read and
			// decoded the body; p holds it until then.
			d.node = node
			p.Node = d
		} else {
			p.Node = node
		}
	}
	return node, d.fn, nil
}

// filtered applies the call's NodeFilters to the candidates and picks one
// of what they leave, round robin; the slow path.
func (s *Selector) filtered(ctx context.Context, nodes []selector.Node, filters []selector.NodeFilter) (int, bool) {
	cand := make([]selector.Node, len(nodes))
	copy(cand, nodes)
	for _, f := range filters {
		cand = f(ctx, cand)
	}
	if len(cand) == 0 {
		return 0, false
	}
	// By address (unique among the candidates): a Node's dynamic type
	// need not be comparable.
	pick := cand[int((s.rr.Add(1)-1)%uint32(len(cand)))].Address()
	for j, n := range nodes {
		if n.Address() == pick {
			return j, true
		}
	}
	return 0, false // a filter returned a node of its own
}

var optionsPool = sync.Pool{New: func() any { return new(selector.SelectOptions) }}

// noDone is the done of a call whose result nobody keeps.
func noDone(context.Context, selector.DoneInfo) {}

// callDone is the done of one call: it carries the call's Call and ends
// it with the call's result. Kratos' clients call a Select's done once,
// when the call ends, so once it has run the object serves another call:
// a pool of them keeps Select from allocating. One whose done never runs
// is left to the collector.
//
// Kratos' HTTP client calls done when the response's headers came, before
// it reads the body: for a call made through Client's middleware, which
// marks the call's selector.Peer (awaitingBody), done only keeps the
// headers' result, the Peer holds the callDone (a selector.Node standing
// for node), and Client ends the call with bodyRead once the body was
// read and decoded.
type callDone struct {
	c  call
	fn selector.DoneFunc // d.done, made once per object

	node   selector.Node // the picked node, while Client awaits the body; nil otherwise
	answer result        // the result done read
	state  doneState
}

// doneState is how far a call whose body Client awaits has come.
type doneState uint8

const (
	awaiting doneState = iota // done has not run
	headers                   // done ran with no error: the body is to be read
	ended                     // done ran with an error: Kratos read the error's body
)

var callDones sync.Pool // of *callDone

func init() {
	callDones.New = func() any {
		d := &callDone{}
		d.fn = d.done
		return d
	}
}

// newCallDone returns the done of a call started as c.
func newCallDone(c call) *callDone {
	d := callDones.Get().(*callDone)
	d.c = c
	return d
}

func (d *callDone) done(ctx context.Context, di selector.DoneInfo) {
	if d.node != nil {
		d.answer, d.state = resultOfDone(ctx, di), headers
		if di.Err != nil {
			d.state = ended
		}
		return
	}
	c := d.c
	d.c = call{}
	callDones.Put(d)
	c.End(resultOfDone(ctx, di))
}

// bodyRead ends a call whose body Client awaited, err being what Kratos'
// client returned: done's result when done had an error (Kratos read the
// error's body before it), else what reading and decoding the body made
// of it (see bodyResult); resultOf(err) when done never ran.
func (d *callDone) bodyRead(ctx context.Context, err error) {
	r := d.bodyResult(ctx, err)
	c := d.c
	d.c, d.node, d.answer, d.state = call{}, nil, 0, awaiting
	callDones.Put(d)
	c.End(r)
}

// bodyResult is the result bodyRead ends the call with.
func (d *callDone) bodyResult(ctx context.Context, err error) result {
	switch d.state {
	case awaiting:
		return resultOf(err)
	case headers:
		return bodyResult(ctx, d.answer, err)
	}
	return d.answer
}

// The Node methods of a callDone a Peer holds are its node's.
func (d *callDone) Scheme() string              { return d.node.Scheme() }
func (d *callDone) Address() string             { return d.node.Address() }
func (d *callDone) ServiceName() string         { return d.node.ServiceName() }
func (d *callDone) InitialWeight() *int64       { return d.node.InitialWeight() }
func (d *callDone) Version() string             { return d.node.Version() }
func (d *callDone) Metadata() map[string]string { return d.node.Metadata() }

// awaitingBody is what Client sets on an HTTP call's selector.Peer before
// the call: the call's Select then leaves its end to Client (see
// callDone). It stands for no node.
type awaitingBody struct{}

func (awaitingBody) Scheme() string              { return "" }
func (awaitingBody) Address() string             { return "" }
func (awaitingBody) ServiceName() string         { return "" }
func (awaitingBody) InitialWeight() *int64       { return nil }
func (awaitingBody) Version() string             { return "" }
func (awaitingBody) Metadata() map[string]string { return nil }

// instanceOf is the graylb instance of node n of service, n's Version
// under versionKey of its metadata unless the metadata has one.
func instanceOf(service string, n selector.Node, versionKey string) (graylb.Instance, bool) {
	host, port, ok := splitHostPort(n.Address())
	if !ok {
		return graylb.Instance{}, false
	}
	md := n.Metadata()
	if v := n.Version(); v != "" && md[versionKey] == "" {
		c := make(map[string]string, len(md)+1)
		for k, x := range md {
			c[k] = x
		}
		c[versionKey] = v
		md = c
	}
	in := graylb.NewInstance(service, host, port, md)
	if w, err := strconv.ParseFloat(md[weightKey], 64); err == nil && !math.IsNaN(w) {
		in.Weight = w
	} else if w := n.InitialWeight(); w != nil {
		in.Weight = float64(*w)
	}
	return in, true
}

// weightKey is the metadata key of an instance's weight, as Kratos' nodes
// read it.
const weightKey = "weight"

var (
	_ selector.Builder  = (*Builder)(nil)
	_ selector.Selector = (*Selector)(nil)
	_ selector.Node     = (*callDone)(nil)
	_ selector.Node     = awaitingBody{}
)
