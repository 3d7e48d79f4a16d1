package grpcctx

import (
	"context"

	"github.com/graylb/graylb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Name is the balancer's registered name.
const Name = "graylb"

// ServiceConfig selects the graylb balancer.
const ServiceConfig = `{"loadBalancingConfig":[{"` + Name + `":{}}]}`

func init() {
	balancer.Register(base.NewBalancerBuilder(Name, pickerBuilder{}, base.Config{}))
}

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
		s, ok := sci.Address.Attributes.Value(attrKey{}).(*source)
		if !ok {
			return base.NewErrPicker(status.Error(codes.Internal, "grpcctx: the graylb balancer needs addresses from the grpcctx resolver"))
		}
		src = s
		ready[sci.Address.Addr] = sc
	}
	list, err := src.lb.Cache().Instances(context.Background(), src.service)
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
// block and, on the common path, does not allocate. The kind a call's rules
// decided was written on the call by the client interceptors, so the
// picker reads the same decision.
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
