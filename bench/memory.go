package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/go-kratos/kratos/v2/selector/filter"
	"github.com/go-kratos/kratos/v2/selector/p2c"
	"github.com/go-kratos/kratos/v2/selector/wrr"
	"github.com/graylb/graylb"
	graylbfilter "github.com/graylb/graylb/filter"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"
)

// MemorySize is one row of the memory table: services of instances each,
// half of them gray, and with versions each tagged one of three versions.
type MemorySize struct {
	Services, Instances int
	Versions            bool
}

// MemorySizes are the rows of the memory table.
var MemorySizes = []MemorySize{{1000, 10, false}, {1000, 10, true}, {1000, 100, true}, {10000, 10, true}}

// MemoryFixture is what the registry hands over, built before a peer is
// measured and not counted: graylb's instance lists and Kratos' service
// instances, one list per service.
type MemoryFixture struct {
	Size   MemorySize
	Names  []string
	Lists  map[string][]graylb.Instance
	Kratos map[string][]*registry.ServiceInstance
}

// NewMemoryFixture builds the lists of size, for services services (the
// size's own count when 0).
func NewMemoryFixture(size MemorySize, services int) *MemoryFixture {
	if services == 0 {
		services = size.Services
	}
	f := &MemoryFixture{Size: size, Lists: map[string][]graylb.Instance{}, Kratos: map[string][]*registry.ServiceInstance{}}
	for s := 0; s < services; s++ {
		name := "svc-" + strconv.Itoa(s)
		f.Names = append(f.Names, name)
		list := make([]graylb.Instance, size.Instances)
		ks := make([]*registry.ServiceInstance, size.Instances)
		for i := range list {
			md := map[string]string{"gray": strconv.FormatBool(i%2 == 1)}
			if size.Versions {
				md["version"] = "v" + strconv.Itoa(1+i/2%3)
			}
			list[i] = graylb.NewInstance(name, fmt.Sprintf("10.%d.%d.%d", s/256%256, s%256, i%256), 8000+i/256, md)
			ks[i] = &registry.ServiceInstance{ID: list[i].Addr(), Name: name, Version: md["version"], Metadata: md,
				Endpoints: []string{"http://" + list[i].Addr()}}
		}
		f.Lists[name] = list
		f.Kratos[name] = ks
	}
	return f
}

// MemoryPeer is a peer that holds the routing state of many services.
type MemoryPeer struct {
	Name string
	// Per is how many services it is measured over, as a fraction of the
	// size's (1: all of them; 10: a tenth, the figures per service and
	// per instance being the same and the whole scaled up).
	Per int
	// Hold builds the state of every service of f, picks each service
	// once gray and once prod, and returns what keeps the state alive.
	Hold func(f *MemoryFixture) (keep any, release func(), err error)
}

// MemoryResult is one peer at one size.
type MemoryResult struct {
	PerService, PerInstance float64 // bytes
	Whole                   float64 // bytes, at the size's service count
}

// MeasureMemory measures the heap p holds at size: the least of runs
// measurements of the live heap after GC, once its state is built, over
// the heap before (the fixture built already).
func MeasureMemory(p MemoryPeer, size MemorySize, runs int) (MemoryResult, error) {
	per := max(p.Per, 1)
	services := size.Services / per
	least := -1.0
	for range max(runs, 1) {
		f := NewMemoryFixture(size, services)
		before := liveHeap()
		keep, release, err := p.Hold(f)
		if err != nil {
			return MemoryResult{}, err
		}
		after := liveHeap()
		runtime.KeepAlive(keep)
		runtime.KeepAlive(f)
		release()
		if d := float64(after) - float64(before); least < 0 || d < least {
			least = d
		}
	}
	ps := least / float64(services)
	return MemoryResult{PerService: ps, PerInstance: ps / float64(size.Instances), Whole: ps * float64(size.Services)}, nil
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memoryRequests are a gray and a prod request for version v1.
func memoryRequests() [2]context.Context { return Requests() }

// GraylbMemory is a LoadBalancer over a static supplier of every service
// of the fixture, with a VersionFilter when versions is set.
func GraylbMemory(versions bool) MemoryPeer {
	name := "graylb, gray routing"
	if versions {
		name = "graylb, gray routing + VersionFilter"
	}
	return MemoryPeer{Name: name, Per: 1, Hold: func(f *MemoryFixture) (any, func(), error) {
		var opts []graylb.Option
		if versions {
			opts = append(opts, graylb.WithFilters(graylbfilter.Version()))
		}
		lb, err := graylb.New(staticMany(f.Lists), opts...)
		if err != nil {
			return nil, nil, err
		}
		for _, name := range f.Names {
			for _, ctx := range memoryRequests() {
				if _, err := lb.Pick(ctx, name); err != nil {
					lb.Close()
					return nil, nil, err
				}
			}
		}
		return lb, func() { lb.Close() }, nil
	}}
}

// KratosMemory is one Kratos selector per service (the builder's Build,
// then Apply of the service's nodes), each picked once gray and once prod
// through the gray NodeFilter, and filter.Version when the instances have
// versions (Kratos filters per request: versions add no state).
func KratosMemory(name string, b selector.Builder) MemoryPeer {
	return MemoryPeer{Name: "kratos " + name + " (a selector per service)", Per: 1, Hold: func(f *MemoryFixture) (any, func(), error) {
		sels := make([]selector.Selector, 0, len(f.Names))
		filters := selector.WithNodeFilter(grayNodeFilter)
		if f.Size.Versions {
			filters = selector.WithNodeFilter(grayNodeFilter, filter.Version("v1"))
		}
		for _, name := range f.Names {
			sel := b.Build()
			ks := f.Kratos[name]
			nodes := make([]selector.Node, len(ks))
			for i, in := range ks {
				nodes[i] = selector.NewNode("http", in.ID, in)
			}
			sel.Apply(nodes)
			for _, ctx := range memoryRequests() {
				_, done, err := sel.Select(ctx, filters)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", name, err)
				}
				done(ctx, selector.DoneInfo{})
			}
			sels = append(sels, sel)
		}
		return sels, func() {}, nil
	}}
}

// GRPCRoundRobinMemory is grpc-go's round_robin balancer per service, as
// one ClientConn per target holds it, built through the balancer API with
// fake SubConns that turn READY at once (no ClientConn, no transports: a
// floor for what grpc-go holds per target), each picked twice. It routes
// by neither kind nor version: the state is the same with versions.
func GRPCRoundRobinMemory() MemoryPeer {
	return MemoryPeer{Name: "grpc-go round_robin (a balancer per service)", Per: 10, Hold: func(f *MemoryFixture) (any, func(), error) {
		bs := make([]balancer.Balancer, 0, len(f.Names))
		pickers := make([]balancer.Picker, 0, len(f.Names))
		for _, name := range f.Names {
			cc := &fakeCC{}
			b := balancer.Get("round_robin").Build(cc, balancer.BuildOptions{})
			list := f.Lists[name]
			eps := make([]resolver.Endpoint, len(list))
			for i, in := range list {
				eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: in.Addr()}}}
			}
			if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: eps}}); err != nil {
				return nil, nil, err
			}
			p := cc.waitPicker(len(list))
			if p == nil {
				return nil, nil, fmt.Errorf("%s: round_robin produced no READY picker", name)
			}
			for range 2 {
				if _, err := p.Pick(balancer.PickInfo{Ctx: context.Background()}); err != nil {
					return nil, nil, err
				}
			}
			bs = append(bs, b)
			pickers = append(pickers, p)
		}
		return []any{bs, pickers}, func() {
			for _, b := range bs {
				b.Close()
			}
		}, nil
	}}
}

// MemoryPeers are the peers of the memory table.
func MemoryPeers() []MemoryPeer {
	return []MemoryPeer{GraylbMemory(false), GraylbMemory(true),
		KratosMemory("wrr", wrr.NewBuilder()), KratosMemory("p2c", p2c.NewBuilder()), GRPCRoundRobinMemory()}
}

// staticMany is a Supplier over fixed lists.
type staticMany map[string][]graylb.Instance

func (s staticMany) Instances(_ context.Context, service string) ([]graylb.Instance, error) {
	if l, ok := s[service]; ok {
		return l, nil
	}
	return nil, graylb.ErrUnknownService
}
func (s staticMany) Watch(string, func([]graylb.Instance)) (func(), error) { return func() {}, nil }
