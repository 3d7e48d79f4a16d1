package grpcctx

import (
	"errors"
	"fmt"

	"github.com/graylb/graylb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// Name is the balancer's registered name.
const Name = "graylb"

// ServiceConfig selects the graylb balancer.
const ServiceConfig = `{"loadBalancingConfig":[{"` + Name + `":{}}]}`

func init() { balancer.Register(builder{}) }

// DialOptions returns what a client needs: the resolver for graylb:///
// targets over lb's Supplier, the service config selecting the balancer,
// and the client interceptors. lb must read metadata:
// graylb.WithContextHandler(grpcctx.Handler()).
//
// The client interceptors make each call's gray decision once: when lb's
// rules (a gray user, the canary), a context value or the caller's own
// flag decided the kind, they write it under the gray key, the picker reads
// it back, and every later hop routes the same way, unary and streaming.
// A kind the call already carries is left as it is.
func DialOptions(lb *graylb.LoadBalancer) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithResolvers(NewResolverBuilder(lb)),
		grpc.WithDefaultServiceConfig(ServiceConfig),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(lb)),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(lb)),
	}
}

type builder struct{}

func (builder) Name() string { return Name }

func (builder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	return &graylbBalancer{cc: cc, conns: map[string]*conn{}}
}

// conn is one instance's connection and what the balancer knows of it.
type conn struct {
	sc    balancer.SubConn
	inst  graylb.Instance
	state connectivity.State
	err   error // the last connection error
}

// graylbBalancer keeps one connection per address the resolver gives and,
// on every change of the addresses, their instances, their connections'
// states or the rules, builds a picker: a graylb Router over the
// addresses' instances whose leaves pick among their READY connections.
// grpc-go calls it from one goroutine at a time.
type graylbBalancer struct {
	cc      balancer.ClientConn
	src     *source
	conns   map[string]*conn // by address
	order   []string         // addresses in the resolver's order
	lastErr error            // resolver error, when there are no addresses
}

func (b *graylbBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	addrs := s.ResolverState.Addresses
	if len(addrs) == 0 {
		// The service really emptied (the Cache hands an empty list over
		// only then): drop every connection and fail RPCs with Unavailable.
		b.Close()
		b.order = b.order[:0]
		b.ResolverError(errors.New("produced zero addresses"))
		return balancer.ErrBadResolverState
	}
	seen := make(map[string]bool, len(addrs))
	b.order = b.order[:0]
	for _, a := range addrs {
		src, ok := a.Attributes.Value(attrKey{}).(*source)
		if !ok {
			b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
				Picker: errPicker{status.Error(codes.Internal, "grpcctx: the graylb balancer needs addresses from the grpcctx resolver")}})
			return balancer.ErrBadResolverState
		}
		b.src = src
		if seen[a.Addr] {
			continue
		}
		seen[a.Addr] = true
		b.order = append(b.order, a.Addr)
		if c := b.conns[a.Addr]; c != nil {
			c.inst = src.inst // metadata may have changed (a gray flip)
			continue
		}
		c := &conn{inst: src.inst, state: connectivity.Idle}
		//lint:ignore SA1019 one address per SubConn, which is what the deprecation asks for
		sc, err := b.cc.NewSubConn([]resolver.Address{{Addr: a.Addr, ServerName: a.ServerName, Attributes: a.Attributes}},
			balancer.NewSubConnOptions{StateListener: func(st balancer.SubConnState) { b.updateState(c, st) }})
		if err != nil {
			continue
		}
		c.sc = sc
		b.conns[a.Addr] = c
		sc.Connect()
	}
	for addr, c := range b.conns {
		if !seen[addr] {
			c.sc.Shutdown()
			delete(b.conns, addr)
		}
	}
	b.lastErr = nil
	b.regenerate()
	return nil
}

func (b *graylbBalancer) updateState(c *conn, st balancer.SubConnState) {
	if st.ConnectivityState == connectivity.Shutdown {
		return
	}
	c.state = st.ConnectivityState
	switch c.state {
	case connectivity.TransientFailure:
		c.err = st.ConnectionError
	case connectivity.Idle:
		c.sc.Connect() // reconnect, as round_robin does
	}
	if b.conns[c.inst.Addr()] == c { // not shut down meanwhile
		b.regenerate()
	}
}

func (b *graylbBalancer) ResolverError(err error) {
	b.lastErr = err
	if len(b.conns) == 0 {
		b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
			Picker: errPicker{status.Errorf(codes.Unavailable, "grpcctx: resolver: %v", err)}})
	}
}

// UpdateSubConnState is not used: each connection has a StateListener.
func (b *graylbBalancer) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (b *graylbBalancer) ExitIdle() {
	for _, c := range b.conns {
		if c.state == connectivity.Idle {
			c.sc.Connect()
		}
	}
}

func (b *graylbBalancer) Close() {
	for addr, c := range b.conns {
		c.sc.Shutdown()
		delete(b.conns, addr)
	}
}

// regenerate sends grpc-go the aggregate state and a new picker.
func (b *graylbBalancer) regenerate() {
	state := connectivity.TransientFailure
	ready := map[string]*conn{}
	for addr, c := range b.conns {
		switch c.state {
		case connectivity.Ready:
			ready[addr] = c
			state = connectivity.Ready
		case connectivity.Connecting, connectivity.Idle:
			if state != connectivity.Ready {
				state = connectivity.Connecting
			}
		}
	}
	list := make([]graylb.Instance, 0, len(b.order))
	for _, addr := range b.order {
		if c := b.conns[addr]; c != nil {
			list = append(list, c.inst)
		}
	}
	router, err := b.src.lb.NewRouter(b.src.service, list, readyPolicy{b: b, inner: b.src.lb.Policy()})
	if err != nil {
		b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
			Picker: errPicker{status.Error(codes.Internal, err.Error())}})
		return
	}
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: &picker{router: router, service: b.src.service}})
}

// picker runs the chain with the RPC's context and the LoadBalancer's
// policy over the READY connections of the chosen candidates; Pick does
// not block and, on the common path, does not allocate. The kind a call's
// rules decided was written on the call by the client interceptors, so the
// picker reads the same decision.
//
// When the candidates have no READY connection, it follows grpc-go's
// convention: while one of them is still connecting the RPC queues; when
// every one has failed, the RPC fails at once with Unavailable and the last
// connection error (grpc-go queues it instead when it is wait-for-ready).
// Prod never goes to gray: the candidates are the request's kind only.
type picker struct {
	router  *graylb.Router
	service string
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.router.Route(info.Ctx)
	if err != nil {
		// The request's kind has no instance at all.
		return balancer.PickResult{}, status.Error(codes.Unavailable, err.Error())
	}
	rp, _ := rt.Picker().(*readyPicker)
	if sc := rp.next(); sc != nil {
		return balancer.PickResult{SubConn: sc}, nil
	}
	if rp == nil || rp.connecting {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	// Not a status error: grpc-go fails a non-wait-for-ready RPC with
	// Unavailable and this message, and queues a wait-for-ready one.
	return balancer.PickResult{}, fmt.Errorf("grpcctx: no connection to the %s instances of %q: %w", rt.Kind, p.service, rp.lastErr)
}

// errPicker fails every RPC with err.
type errPicker struct{ err error }

func (p errPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, p.err
}

// readyPolicy builds, for each leaf of the routing tree, the
// LoadBalancer's own policy (round robin, weighted, random) over the
// leaf's instances that have a READY connection, and notes whether the
// others are still connecting or have failed.
type readyPolicy struct {
	b     *graylbBalancer
	inner graylb.Policy
}

func (p readyPolicy) NewPicker(list []graylb.Instance) graylb.Picker {
	rp := &readyPicker{}
	var readyList []graylb.Instance
	for i, in := range list {
		c := p.b.conns[in.Addr()]
		switch {
		case c == nil:
		case c.state == connectivity.Ready:
			rp.idx = append(rp.idx, i)
			rp.scs = append(rp.scs, c.sc)
			readyList = append(readyList, in)
		case c.state == connectivity.TransientFailure:
			if c.err != nil {
				rp.lastErr = c.err
			}
		default:
			rp.connecting = true
		}
	}
	if len(readyList) > 0 {
		rp.inner = p.inner.NewPicker(readyList)
	}
	if rp.lastErr == nil {
		rp.lastErr = errors.New("connection failed")
	}
	return rp
}

// readyPicker picks among a leaf's READY connections.
type readyPicker struct {
	idx        []int // leaf index of each READY instance
	scs        []balancer.SubConn
	inner      graylb.Picker // over the READY instances
	connecting bool          // a candidate without a READY connection is still connecting
	lastErr    error         // else the last connection error among them
}

func (p *readyPicker) Next() int {
	if p.inner == nil {
		return 0
	}
	return p.idx[p.inner.Next()]
}

func (p *readyPicker) next() balancer.SubConn {
	if p == nil || p.inner == nil {
		return nil
	}
	return p.scs[p.inner.Next()]
}

var (
	_ balancer.Balancer = (*graylbBalancer)(nil)
	_ balancer.Picker   = (*picker)(nil)
)
