package grpcctx

import (
	"errors"
	"sync"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// Name is the balancer's registered name.
const Name = "graylb"

func init() { balancer.Register(builder{}) }

// DialOptions returns what a client needs: the resolver for graylb:///
// targets over lb's Supplier, the service config selecting the balancer,
// the client interceptors, and the reconnect back-off (ReconnectBackoff; a
// grpc.WithConnectParams after DialOptions replaces it). The interceptors
// and the picker read the call's outgoing metadata and the request's
// admitted keys themselves, whether or not lb has a ContextHandler.
//
// The client interceptors decide each call's kind once: when rules (a gray
// user, the canary), a context value or the caller's own flag decided it,
// they write it under the gray key, the picker reads it back, and every
// later hop routes the same way, unary and streaming. A kind the call
// already carries is left as it is.
//
// The last grpc.WithDefaultServiceConfig counts, whole: a program's own
// service config (a retryPolicy) goes after DialOptions and selects
// graylb's balancer ("loadBalancingConfig":[{"graylb":{}}], as
// ServiceConfig and ServiceConfigWithFailureCodes do). One that selects
// another balancer is refused: no instance is dialled, and every RPC fails
// with codes.Unavailable and an error wrapping ErrOtherBalancer (with
// grpc.WithDisableServiceConfig, the resolver's build error). docs/grpc.md
// says why and what each costs.
// opts configure the client interceptors (WithMirror).
func DialOptions(lb *graylb.LoadBalancer, opts ...ClientOption) []grpc.DialOption {
	// The service config and the back-off first: gozero.NewClient puts
	// these two before the program's options (which may replace them) and
	// the rest after them.
	return []grpc.DialOption{
		grpc.WithDefaultServiceConfig(ServiceConfig),
		grpc.WithConnectParams(ReconnectBackoff()),
		grpc.WithResolvers(&resolverBuilder{lb: lb, ab: adapter.For(lb), guard: true}),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(lb, opts...)),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(lb, opts...)),
	}
}

type builder struct{}

func (builder) Name() string { return Name }

func (builder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	b := &graylbBalancer{cc: cc, conns: map[string]*conn{}, failures: defaultFailureCodes}
	b.waits.b = b
	return b
}

// conn is one instance's connection and what the balancer knows of it.
type conn struct {
	sc    balancer.SubConn
	inst  graylb.Instance
	state connectivity.State
	err   error // the last connection error
	// failing: the connection went TRANSIENT_FAILURE and has not been
	// READY since; its retries (IDLE, CONNECTING) do not make it a
	// connection that is still coming up (as grpc-go's round_robin sticks
	// to TRANSIENT_FAILURE until a READY).
	failing bool
}

// graylbBalancer keeps one connection per address the resolver gives and,
// on every change of the addresses, their instances, their connections'
// states or the rules, builds a picker: graylb's routing over the
// connections (adapter.Endpoints), whose leaves pick among the READY ones.
// grpc-go calls it from one goroutine at a time.
//
// With outlier detection (graylb.WithOutlierDetection) each RPC's result is
// reported for the instance that served it (PickResult.Done; which status
// codes count is the balancer config's, DefaultFailureCodes by default),
// and an ejection or readmission rebuilds the routing of the picker in use,
// without a new picker.
type graylbBalancer struct {
	cc       balancer.ClientConn
	mu       sync.Mutex // grpc-go's calls and ejection changes
	src      *source
	conns    map[string]*conn // by address
	order    []string         // addresses in the resolver's order
	lastErr  error            // resolver error, when there are no addresses
	failures failureSet
	picker   *picker // the last picker sent, nil when none
	unwatch  func()  // stops following ejections
	waits    waits   // RPCs queued for connections being made
}

func (b *graylbBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := s.ResolverState.Attributes.Value(probeKey{}).(*balancerProbe); ok {
		// The resolver's check that the service config selects this
		// balancer: no address yet, and nothing to change.
		p.seen.Store(true)
		return nil
	}
	if r, ok := s.ResolverState.Attributes.Value(refusedKey{}).(*refusal); ok {
		// READY, so that a dial that blocks until READY (zrpc's) returns
		// and its RPCs tell why they fail.
		b.closeConns()
		b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.Ready,
			Picker: errPicker{status.Error(codes.Unavailable, r.err.Error())}})
		return nil
	}
	if cfg, ok := s.BalancerConfig.(*lbConfig); ok {
		b.failures = cfg.set
	}
	addrs := s.ResolverState.Addresses
	if len(addrs) == 0 {
		// The service really emptied (the Cache hands an empty list over
		// only then): drop every connection and fail RPCs with Unavailable.
		b.closeConns()
		b.order = b.order[:0]
		b.resolverError(errors.New("produced zero addresses"))
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
		if b.unwatch == nil {
			ab, service := src.ab, src.service
			b.unwatch = ab.OnEjectionChange(func(s string) {
				if s == service {
					b.ejectionChanged()
				}
			})
		}
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

// ejectionChanged rebuilds the routing of the picker in use after an
// ejection or readmission: the instances' usability changed, not the
// connections.
func (b *graylbBalancer) ejectionChanged() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.picker == nil || b.src == nil {
		return
	}
	if live, all, err := b.newRouting(); err == nil {
		b.picker.all.Store(all)
		b.picker.live.Store(live)
	}
}

func (b *graylbBalancer) updateState(c *conn, st balancer.SubConnState) {
	b.mu.Lock()
	if st.ConnectivityState == connectivity.Shutdown {
		b.mu.Unlock()
		return
	}
	c.state = st.ConnectivityState
	failed := false
	switch c.state {
	case connectivity.TransientFailure:
		c.err = st.ConnectionError
		c.failing = true
		failed = true
	case connectivity.Ready:
		c.failing = false
	case connectivity.Idle:
		c.sc.Connect() // reconnect, as round_robin does
	}
	current := b.conns[c.inst.Addr()] == c // not shut down meanwhile
	if current {
		b.regenerate()
	}
	src, inst := b.src, c.inst
	b.mu.Unlock()
	// A failed connection attempt is a failure of its instance, as a dial
	// failure is over HTTP: with outlier detection an instance that cannot
	// be reached is ejected, and a gray request whose gray instances are
	// all unreachable falls back to prod. Reported outside b.mu: an
	// ejection rebuilds this balancer's routing.
	if failed && current && src != nil {
		src.ab.Report(src.service, inst, false, 0)
	}
}

func (b *graylbBalancer) ResolverError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resolverError(err)
}

func (b *graylbBalancer) resolverError(err error) {
	b.lastErr = err
	if len(b.conns) == 0 {
		b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
			Picker: errPicker{status.Errorf(codes.Unavailable, "grpcctx: resolver: %v", err)}})
	}
}

// UpdateSubConnState is not used: each connection has a StateListener.
func (b *graylbBalancer) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (b *graylbBalancer) ExitIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		if c.state == connectivity.Idle {
			c.sc.Connect()
		}
	}
}

func (b *graylbBalancer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unwatch != nil {
		b.unwatch()
	}
	b.closeConns()
}

func (b *graylbBalancer) closeConns() {
	for addr, c := range b.conns {
		c.sc.Shutdown()
		delete(b.conns, addr)
	}
}

// regenerate sends grpc-go the aggregate state and a new picker; b.mu is
// held.
func (b *graylbBalancer) regenerate() {
	state := connectivity.TransientFailure
	for _, c := range b.conns {
		switch c.state {
		case connectivity.Ready:
			state = connectivity.Ready
		case connectivity.Connecting, connectivity.Idle:
			if state != connectivity.Ready && !c.failing {
				state = connectivity.Connecting
			}
		}
	}
	live, all, err := b.newRouting()
	if err != nil {
		b.picker = nil
		b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
			Picker: errPicker{status.Error(codes.Internal, err.Error())}})
		return
	}
	p := &picker{service: b.src.service, failures: b.failures, waits: &b.waits}
	p.all.Store(all)
	p.live.Store(live)
	b.picker = p
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: p})
}

// newRouting builds the picker's routing over the connections, whose
// leaves pick among READY ones: live over the instances whose connection
// has not failed, all over every address's instance (live itself when no
// connection has failed); b.mu is held.
func (b *graylbBalancer) newRouting() (live, all *adapter.Endpoints[endpoint], err error) {
	list := make([]adapter.Endpoint[endpoint], 0, len(b.order))
	up := make([]adapter.Endpoint[endpoint], 0, len(b.order))
	for _, addr := range b.order {
		if c := b.conns[addr]; c != nil {
			e := adapter.Endpoint[endpoint]{Instance: c.inst, Handle: endpoint{sc: c.sc, state: c.state, failing: c.failing, err: c.err}}
			list = append(list, e)
			if !c.failing {
				up = append(up, e)
			}
		}
	}
	if all, err = adapter.NewEndpoints(b.src.ab, b.src.service, list, ready); err != nil || len(up) == len(list) {
		return all, all, err
	}
	live, err = adapter.NewEndpoints(b.src.ab, b.src.service, up, ready)
	return live, all, err
}

var (
	_ balancer.Balancer     = (*graylbBalancer)(nil)
	_ balancer.Picker       = (*picker)(nil)
	_ balancer.ConfigParser = builder{}
)
