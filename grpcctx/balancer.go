package grpcctx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/graylb/graylb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// Name is the balancer's registered name.
const Name = "graylb"

// Scheme is the resolver's scheme: nacos:///<service>.
const Scheme = "nacos"

// ServiceConfig selects the graylb balancer.
const ServiceConfig = `{"loadBalancingConfig":[{"` + Name + `":{}}]}`

func init() {
	balancer.Register(base.NewBalancerBuilder(Name, pickerBuilder{}, base.Config{}))
}

// DialOptions returns what a client needs: the resolver for nacos:///
// targets over lb's Supplier, the service config selecting the balancer,
// and the client interceptors. lb must read metadata:
// graylb.WithContextHandler(grpcctx.Handler()).
func DialOptions(lb *graylb.LoadBalancer) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithResolvers(NewResolverBuilder(lb)),
		grpc.WithDefaultServiceConfig(ServiceConfig),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor()),
	}
}

// attrKey is the address attribute key; its value is a *source.
type attrKey struct{}

// source is what an address came from: the LoadBalancer and service.
type source struct {
	lb      *graylb.LoadBalancer
	service string
	inst    graylb.Instance
}

// Equal compares sources by LoadBalancer, service and instance address.
func (s *source) Equal(o any) bool {
	t, ok := o.(*source)
	return ok && t.lb == s.lb && t.service == s.service && t.inst.Addr() == s.inst.Addr()
}

// InstanceOf returns the instance an address resolved by this package
// stands for.
func InstanceOf(a resolver.Address) (graylb.Instance, bool) {
	s, ok := a.BalancerAttributes.Value(attrKey{}).(*source)
	if !ok {
		return graylb.Instance{}, false
	}
	return s.inst, true
}

// NewResolverBuilder returns a resolver builder for nacos:///<service>
// over lb's Supplier (the in-memory registry, Nacos, or any other). Each
// address carries its instance (metadata, weight) as an attribute. The
// resolver follows the Supplier's changes through lb's Cache, which never
// hands over an empty list over a non-empty one while its empty-update
// protection holds (see graylb.Cache); an empty list it does hand over is
// pushed as it is.
func NewResolverBuilder(lb *graylb.LoadBalancer) resolver.Builder { return &resolverBuilder{lb: lb} }

type resolverBuilder struct{ lb *graylb.LoadBalancer }

func (b *resolverBuilder) Scheme() string { return Scheme }

func (b *resolverBuilder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	if b.lb == nil {
		return nil, errors.New("grpcctx: resolver has no LoadBalancer")
	}
	service := strings.TrimPrefix(target.URL.Path, "/")
	if service == "" {
		service = target.URL.Host
	}
	if err := graylb.ValidateServiceName(service); err != nil {
		return nil, fmt.Errorf("grpcctx: target %q: %w", target.URL.String(), err)
	}
	r := &nacosResolver{cc: cc, lb: b.lb, service: service}
	list, err := b.lb.Supplier().Instances(context.Background(), service)
	if err != nil {
		return nil, fmt.Errorf("grpcctx: resolving %q: %w", service, err)
	}
	r.push(list)
	stop, err := b.lb.Supplier().Watch(service, r.push)
	if err != nil {
		return nil, fmt.Errorf("grpcctx: watching %q: %w", service, err)
	}
	r.stop = stop
	return r, nil
}

type nacosResolver struct {
	cc      resolver.ClientConn
	lb      *graylb.LoadBalancer
	service string
	mu      sync.Mutex
	closed  bool
	stop    func()
}

func (r *nacosResolver) push(list []graylb.Instance) {
	addrs := make([]resolver.Address, len(list))
	for i, in := range list {
		addrs[i] = resolver.Address{
			Addr:               in.Addr(),
			BalancerAttributes: attributes.New(attrKey{}, &source{lb: r.lb, service: r.service, inst: in}),
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	// The Cache hands over an empty list only when the service really
	// emptied (protection off, or still empty after its grace period):
	// pass it on, and RPCs fail with Unavailable.
	if err := r.cc.UpdateState(resolver.State{Addresses: addrs}); err != nil && len(addrs) > 0 {
		r.cc.ReportError(fmt.Errorf("grpcctx: %q: %w", r.service, err))
	}
}

func (r *nacosResolver) ResolveNow(resolver.ResolveNowOptions) {}

func (r *nacosResolver) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	if r.stop != nil {
		r.stop()
	}
}

// pickerBuilder builds a picker per change of the READY connections: a
// graylb Router over the service's current instances whose leaves pick
// among their READY connections.
type pickerBuilder struct{}

func (pickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	var src *source
	ready := make(map[string]balancer.SubConn, len(info.ReadySCs))
	for sc, sci := range info.ReadySCs {
		s, ok := sci.Address.BalancerAttributes.Value(attrKey{}).(*source)
		if !ok {
			return base.NewErrPicker(status.Error(codes.Internal, "grpcctx: the graylb balancer needs addresses from the grpcctx resolver"))
		}
		src = s
		ready[sci.Address.Addr] = sc
	}
	list, err := src.lb.Supplier().Instances(context.Background(), src.service)
	if err != nil {
		return base.NewErrPicker(status.Error(codes.Unavailable, err.Error()))
	}
	router, err := src.lb.NewRouter(src.service, list, readyPolicy{ready: ready, inner: src.lb.Policy()})
	if err != nil {
		return base.NewErrPicker(status.Error(codes.Internal, err.Error()))
	}
	return &picker{router: router}
}

// picker runs the chain with the RPC's context and the LoadBalancer's
// policy over the READY connections of the chosen candidates; Pick does not
// block and, on the common path, does not allocate.
//
// Unlike the HTTP Transport it does not write the routed kind into the
// call's metadata: PickResult.Metadata costs 13 allocations per RPC in
// grpc-go's merge (measured by BenchmarkBalancerOverhead). The kind still
// travels: the caller's gray key is propagated by the interceptors, and a
// canary decision is sticky by the propagated user id.
type picker struct {
	router *graylb.Router
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.router.Route(info.Ctx)
	if err != nil {
		// The request's kind has no instance at all.
		return balancer.PickResult{}, status.Error(codes.Unavailable, err.Error())
	}
	rp, _ := rt.Picker().(*readyPicker)
	sc := rp.next()
	if sc == nil {
		// The kind has instances, none READY yet: queue.
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	return balancer.PickResult{SubConn: sc}, nil
}

// readyPolicy builds, for each leaf of the routing tree, the
// LoadBalancer's own policy (round robin, weighted, random) over the leaf's
// instances that have a READY connection.
type readyPolicy struct {
	ready map[string]balancer.SubConn
	inner graylb.Policy
}

func (p readyPolicy) NewPicker(list []graylb.Instance) graylb.Picker {
	rp := &readyPicker{}
	var readyList []graylb.Instance
	for i, in := range list {
		if sc, ok := p.ready[in.Addr()]; ok {
			rp.idx = append(rp.idx, i)
			rp.scs = append(rp.scs, sc)
			readyList = append(readyList, in)
		}
	}
	if len(readyList) > 0 {
		rp.inner = p.inner.NewPicker(readyList)
	}
	return rp
}

// readyPicker picks among a leaf's READY connections.
type readyPicker struct {
	idx   []int // leaf index of each READY instance
	scs   []balancer.SubConn
	inner graylb.Picker // over the READY instances
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
