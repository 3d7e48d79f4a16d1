package grpcctx

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"
)

// Name is the balancer's registered name.
const Name = "graylb"

// ServiceConfig selects the graylb balancer.
const ServiceConfig = `{"loadBalancingConfig":[{"` + Name + `":{}}]}`

func init() { balancer.Register(builder{}) }

// DialOptions returns what a client needs: the resolver for graylb:///
// targets over lb's Supplier, the service config selecting the balancer,
// and the client interceptors. The interceptors and the picker read the
// call's outgoing metadata and the incoming values the server interceptors
// kept themselves, whether or not lb has a ContextHandler.
//
// The client interceptors make each call's gray decision once: when lb's
// rules (a gray user, the canary), a context value or the caller's own
// flag decided the kind, they write it under the gray key, the picker reads
// it back, and every later hop routes the same way, unary and streaming.
// A kind the call already carries is left as it is. Writing it costs a
// call without outgoing metadata of its own one allocation (the decision's
// metadata is made once per kind and lane and shared), a call with some
// one append of the pairs; retries and transparent retries resend the
// call's metadata, so every attempt carries it once.
//
// The balancer is chosen by the ClientConn's default service config: of
// several grpc.WithDefaultServiceConfig options the last counts, whole
// (grpc-go merges none, and takes no part of one when a resolver provides
// a service config of its own). DialOptions' resolver provides none, so a
// program's own service config (a methodConfig with a retryPolicy, a
// retryThrottling) is the default one and applies as written; it must
// select graylb's balancer ("loadBalancingConfig":[{"graylb":{}}], as
// ServiceConfig and ServiceConfigWithFailureCodes do) and come after
// DialOptions. One given before DialOptions is replaced by ServiceConfig.
// One given after that selects another balancer (round robin would send
// prod RPCs to gray instances) is refused: before handing over any
// address, the resolver checks which balancer the ClientConn built, and if
// it is not graylb's, no instance is ever dialled and every RPC fails with
// codes.Unavailable and an error that wraps ErrOtherBalancer and says what
// to do. (With grpc.WithDisableServiceConfig the refusal is the resolver's
// build error, which a blocking dial returns.) The resolver does not
// provide graylb's service config instead, so that no part of the
// program's is silently dropped.
func DialOptions(lb *graylb.LoadBalancer) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithResolvers(&resolverBuilder{lb: lb, ab: adapter.For(lb), guard: true}),
		grpc.WithDefaultServiceConfig(ServiceConfig),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(lb)),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(lb)),
	}
}

type builder struct{}

func (builder) Name() string { return Name }

func (builder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	return &graylbBalancer{cc: cc, conns: map[string]*conn{}, failures: defaultFailureCodes}
}

// DefaultFailureCodes are the status codes that count as a failure of the
// instance that answered, for outlier detection and latency-aware
// policies: what an HTTP proxy would see as a 5xx.
var DefaultFailureCodes = []codes.Code{codes.Unavailable, codes.Internal, codes.Unknown, codes.DataLoss}

var defaultFailureCodes = newFailureSet(DefaultFailureCodes)

// failureSet is a set of status codes, by code.
type failureSet [codes.Unauthenticated + 1]bool

func newFailureSet(list []codes.Code) failureSet {
	var s failureSet
	for _, c := range list {
		if int(c) < len(s) {
			s[c] = true
		}
	}
	return s
}

// failed reports whether a call that ended with err counts against its
// instance.
func (s *failureSet) failed(err error) bool {
	if err == nil {
		return false
	}
	c := status.Code(err)
	return int(c) < len(s) && s[c]
}

// lbConfig is the balancer's configuration in the service config:
// {"graylb":{"failureCodes":["UNAVAILABLE",13]}}, codes by name as gRPC
// spells them or by number.
type lbConfig struct {
	serviceconfig.LoadBalancingConfig `json:"-"`
	FailureCodes                      []json.RawMessage `json:"failureCodes"`
	set                               failureSet
}

// ParseConfig reads the balancer's configuration; unknown code names are
// refused.
func (builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	cfg := &lbConfig{}
	if len(js) > 0 {
		if err := json.Unmarshal(js, cfg); err != nil {
			return nil, fmt.Errorf("grpcctx: balancer config: %w", err)
		}
	}
	if cfg.FailureCodes == nil {
		cfg.set = defaultFailureCodes
		return cfg, nil
	}
	list := make([]codes.Code, 0, len(cfg.FailureCodes))
	for _, n := range cfg.FailureCodes {
		var c codes.Code
		if err := c.UnmarshalJSON(n); err != nil {
			return nil, fmt.Errorf("grpcctx: balancer config: failure code %s: %w", n, err)
		}
		list = append(list, c)
	}
	cfg.set = newFailureSet(list)
	return cfg, nil
}

// ServiceConfigWithFailureCodes returns ServiceConfig with the status codes
// that count as an instance's failure (instead of DefaultFailureCodes), for
// grpc.WithDefaultServiceConfig after DialOptions.
func ServiceConfigWithFailureCodes(list ...codes.Code) string {
	nums := make([]uint32, len(list))
	for i, c := range list {
		nums[i] = uint32(c)
	}
	b, _ := json.Marshal(map[string]any{"loadBalancingConfig": []any{map[string]any{Name: map[string]any{"failureCodes": nums}}}})
	return string(b)
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
// states or the rules, builds a picker: a graylb Router over the
// addresses' instances whose leaves pick among their READY connections.
// grpc-go calls it from one goroutine at a time.
//
// With outlier detection (graylb.WithOutlierDetection) each RPC's result is
// reported for the instance that served it (PickResult.Done; which status
// codes count is the balancer config's, DefaultFailureCodes by default),
// and an ejection or readmission rebuilds the Router of the picker in use,
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

// ejectionChanged rebuilds the Router of the picker in use after an
// ejection or readmission: the instances' usability changed, not the
// connections.
func (b *graylbBalancer) ejectionChanged() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.picker == nil || b.src == nil {
		return
	}
	if live, all, err := b.newRouters(); err == nil {
		b.picker.all.Store(all)
		b.picker.router.Store(live)
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
	ready := map[string]*conn{}
	for addr, c := range b.conns {
		switch c.state {
		case connectivity.Ready:
			ready[addr] = c
			state = connectivity.Ready
		case connectivity.Connecting, connectivity.Idle:
			if state != connectivity.Ready && !c.failing {
				state = connectivity.Connecting
			}
		}
	}
	live, all, err := b.newRouters()
	if err != nil {
		b.picker = nil
		b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
			Picker: errPicker{status.Error(codes.Internal, err.Error())}})
		return
	}
	p := &picker{service: b.src.service, failures: b.failures}
	p.all.Store(all)
	p.router.Store(live)
	b.picker = p
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: p})
}

// newRouters builds the picker's Routers, whose leaves pick among READY
// connections: live over the instances whose connection has not failed,
// all over every address's instance (live itself when no connection has
// failed); b.mu is held.
func (b *graylbBalancer) newRouters() (live, all *adapter.Router, err error) {
	list := make([]graylb.Instance, 0, len(b.order))
	up := make([]graylb.Instance, 0, len(b.order))
	for _, addr := range b.order {
		if c := b.conns[addr]; c != nil {
			list = append(list, c.inst)
			if !c.failing {
				up = append(up, c.inst)
			}
		}
	}
	policy := readyPolicy{b: b, inner: b.src.ab.Policy()}
	if all, err = b.src.ab.NewRouter(b.src.service, list, policy); err != nil || len(up) == len(list) {
		return all, all, err
	}
	live, err = b.src.ab.NewRouter(b.src.service, up, policy)
	return live, all, err
}

// picker runs the chain with the RPC's context and the LoadBalancer's
// policy over the READY connections of the chosen candidates; Pick does
// not block and, on the common path, does not allocate. The kind a call's
// rules decided was written on the call by the client interceptors, so the
// picker reads the same decision.
//
// An instance whose connection failed (TRANSIENT_FAILURE, and not READY
// since: a refused or reset connect, a failed handshake) serves nobody: the
// picker routes as if it were not listed, as an ejected instance is not.
// So a gray RPC whose gray instances have all failed falls back to prod's
// READY connections at once (the gray rule's fall-back), instead of
// failing or waiting for an instance that refuses connections; a prod RPC
// never goes to gray.
//
// A connection being made (for the first time, or again after the
// instance closed it: a GOAWAY, MaxConnectionAge, a restart) is not
// failed: its RPCs wait for it, as grpc-go queues RPCs while CONNECTING,
// and stay on their kind. An instance killed abruptly closes its
// connection and refuses the next one within a round trip, so it fails
// then; one that stops answering without closing (a host that vanished,
// no RST) keeps RPCs waiting until the connect timeout
// (grpc.WithConnectParams' MinConnectTimeout, 20 s by default) or the
// RPC's deadline.
//
// When the request's kind has no instance left that has not failed,
// grpc-go's convention applies: while a candidate is connecting the RPC
// queues; when every one has failed it fails at once with Unavailable and
// the last connection error (grpc-go queues it instead when it is
// wait-for-ready).
//
// An RPC picked onto a connection that turns out to be closed is not lost:
// grpc-go waits for the next picker, or retries it transparently when its
// stream could not be started, so it follows the rules above. An RPC
// already sent on a connection that then breaks fails with Unavailable
// (grpc-go cannot know whether the instance acted on it): a retryPolicy
// for UNAVAILABLE in the service config sends idempotent methods again,
// each try picking anew.
//
// When the LoadBalancer keeps Stats, the result's Done reports the RPC's
// outcome for the instance: with outlier detection alone it is made once
// per connection (no allocation per pick); with a latency-aware policy
// (graylb.P2C) it also carries the call's start, in an object taken from
// a pool and returned by Done (see timedDone): no allocation per pick
// either.
type picker struct {
	router   atomic.Pointer[adapter.Router] // over the instances whose connection has not failed
	all      atomic.Pointer[adapter.Router] // over every instance; router itself when none has failed
	service  string
	failures failureSet
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.router.Load().Route(info.Ctx, handler{})
	if err == nil {
		rp, _ := rt.Picker().(*readyPicker)
		if j, ok := rp.nextReady(); ok {
			// p.result, written out: the common path makes no call more.
			res := balancer.PickResult{SubConn: rp.scs[j]}
			switch {
			case rp.timed:
				res.Done = newTimedDone(p, rt.Call(rp.idx[j]))
			case rp.dones != nil:
				res.Done = rp.dones[j]
			}
			return res, nil
		}
		if rp != nil && rp.connecting {
			return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
		}
	}
	return p.pickFailed(info)
}

// pickFailed picks for an RPC whose kind has no instance left whose
// connection has not failed: among every instance, as grpc-go's
// convention has it (see picker).
func (p *picker) pickFailed(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.all.Load().Route(info.Ctx, handler{})
	if err != nil {
		// The request's kind has no instance at all.
		return balancer.PickResult{}, status.Error(codes.Unavailable, err.Error())
	}
	rp, _ := rt.Picker().(*readyPicker)
	if j, ok := rp.nextReady(); ok {
		return p.result(rt, rp, j), nil
	}
	if rp == nil || rp.connecting {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	// Not a status error: grpc-go fails a non-wait-for-ready RPC with
	// Unavailable and this message, and queues a wait-for-ready one.
	return balancer.PickResult{}, fmt.Errorf("grpcctx: no connection to the %s instances of %q: %w", rt.Kind, p.service, rp.lastErr)
}

// result is the pick of READY connection j of rp, a leaf of rt.
func (p *picker) result(rt adapter.Route, rp *readyPicker, j int) balancer.PickResult {
	res := balancer.PickResult{SubConn: rp.scs[j]}
	switch {
	case rp.timed:
		res.Done = newTimedDone(p, rt.Call(rp.idx[j]))
	case rp.dones != nil:
		res.Done = rp.dones[j]
	}
	return res
}

// timedDone is the Done of one RPC picked by a latency-aware policy: it
// carries the RPC's Call (its start, for the latency). grpc-go calls a
// pick's Done at most once (when the attempt finishes, or at once when
// the picked connection turned out not to be ready), so once it has run
// the object serves another pick: a pool of them keeps the pick from
// allocating. One whose Done never runs is left to the collector.
type timedDone struct {
	p    *picker
	call adapter.Call
	fn   func(balancer.DoneInfo) // t.done, made once per object
}

var timedDones sync.Pool // of *timedDone

func init() {
	timedDones.New = func() any {
		t := &timedDone{}
		t.fn = t.done
		return t
	}
}

// newTimedDone returns the Done of an RPC picked as call.
func newTimedDone(p *picker, call adapter.Call) func(balancer.DoneInfo) {
	t := timedDones.Get().(*timedDone)
	t.p, t.call = p, call
	return t.fn
}

func (t *timedDone) done(di balancer.DoneInfo) {
	p, call := t.p, t.call
	t.p, t.call = nil, adapter.Call{}
	timedDones.Put(t)
	p.done(call, di)
}

// done reports one RPC's result.
func (p *picker) done(call adapter.Call, di balancer.DoneInfo) {
	switch {
	case status.Code(di.Err) == codes.Canceled:
		call.Discard()
	case status.Code(di.Err) == codes.DeadlineExceeded && !p.failures.failed(di.Err):
		call.TimedOut(true) // an answer as far as the instance goes; a failure for its caller
	default:
		call.Done(!p.failures.failed(di.Err))
	}
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
	return p.NewStatsPicker(list, nil)
}

// NewStatsPicker is NewPicker over instances whose Stats the LoadBalancer
// keeps: the picker reports each RPC's result to them, and a latency-aware
// inner policy reads them.
func (p readyPolicy) NewStatsPicker(list []graylb.Instance, stats []*graylb.Stats) graylb.Picker {
	rp := &readyPicker{}
	var readyList []graylb.Instance
	var readyStats []*graylb.Stats
	for i, in := range list {
		c := p.b.conns[in.Addr()]
		switch {
		case c == nil:
		case c.state == connectivity.Ready:
			rp.idx = append(rp.idx, i)
			rp.scs = append(rp.scs, c.sc)
			readyList = append(readyList, in)
			if stats != nil {
				readyStats = append(readyStats, stats[i])
			}
		case c.state == connectivity.TransientFailure || c.failing:
			if c.err != nil {
				rp.lastErr = c.err
			}
		default:
			rp.connecting = true
		}
	}
	sp, timed := p.inner.(graylb.StatsPolicy)
	switch {
	case len(readyList) == 0:
	case stats != nil && timed:
		rp.inner = sp.NewStatsPicker(readyList, readyStats)
		rp.timed = true
	case p.b.src.ab.CallObserved():
		// The LoadBalancer's CallObserver is told of every RPC, timed
		// (one closure per RPC, as with a latency-aware policy).
		rp.inner = p.inner.NewPicker(readyList)
		rp.timed = true
	default:
		rp.inner = p.inner.NewPicker(readyList)
		if stats != nil {
			failures := p.b.failures
			rp.dones = make([]func(balancer.DoneInfo), len(readyStats))
			for j, st := range readyStats {
				rp.dones[j] = func(di balancer.DoneInfo) {
					if status.Code(di.Err) != codes.Canceled {
						st.Report(!failures.failed(di.Err), 0)
					}
				}
			}
		}
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
	inner      graylb.Picker             // over the READY instances
	connecting bool                      // a candidate without a READY connection is still connecting
	lastErr    error                     // else the last connection error among them
	timed      bool                      // results carry the call's start (a latency-aware policy, a CallObserver)
	dones      []func(balancer.DoneInfo) // per READY connection, when results are reported untimed
}

func (p *readyPicker) Next() int {
	if p.inner == nil {
		return 0
	}
	return p.idx[p.inner.Next()]
}

// nextReady returns the index of a READY connection, false when there is
// none.
func (p *readyPicker) nextReady() (int, bool) {
	if p == nil || p.inner == nil {
		return 0, false
	}
	return p.inner.Next(), true
}

var (
	_ balancer.Balancer     = (*graylbBalancer)(nil)
	_ balancer.Picker       = (*picker)(nil)
	_ balancer.ConfigParser = builder{}
	_ graylb.StatsPolicy    = readyPolicy{}
)
