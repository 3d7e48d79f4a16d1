package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	_ "google.golang.org/grpc/balancer/roundrobin" // registers round_robin
)

// GRPCRoundRobin is grpc-go's own round_robin balancer, driven through its
// balancer API with fake connections that turn READY at once; Pick is its
// picker's Pick. It filters nothing: the floor of what a pick can cost.
func GRPCRoundRobin() Peer {
	return Peer{Name: "grpc-go round_robin", Note: "no filtering: the floor", Build: func(list []graylb.Instance) (Picker, error) {
		cc := &fakeCC{}
		b := balancer.Get("round_robin").Build(cc, balancer.BuildOptions{})
		byAddr := map[string]graylb.Instance{}
		update := func(list []graylb.Instance) {
			eps := make([]resolver.Endpoint, len(list))
			for i, in := range list {
				eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: in.Addr()}}}
				byAddr[in.Addr()] = in
			}
			if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: eps}}); err != nil {
				panic(err)
			}
		}
		update(list)
		p := cc.waitPicker(len(list))
		if p == nil {
			return Picker{}, fmt.Errorf("round_robin produced no READY picker")
		}
		info := balancer.PickInfo{Ctx: context.Background(), FullMethodName: "/svc/Method"}
		return Picker{
			Pick: func(ctx context.Context) (graylb.Instance, error) {
				r, err := p.Pick(info)
				if err != nil {
					return graylb.Instance{}, err
				}
				return byAddr[r.SubConn.(*fakeSC).addr], nil
			},
			Update: func(l []graylb.Instance) { update(l); p = cc.waitPicker(len(l)) },
			Close:  b.Close,
		}, nil
	}}
}

// fakeCC embeds the interface and overrides what round_robin calls.
type fakeCC struct {
	balancer.ClientConn
	mu    sync.Mutex
	state balancer.State
}

func (c *fakeCC) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	return &fakeSC{addr: addrs[0].Addr, listener: opts.StateListener}, nil
}

func (c *fakeCC) UpdateState(s balancer.State) {
	c.mu.Lock()
	c.state = s
	c.mu.Unlock()
}

func (c *fakeCC) ResolveNow(resolver.ResolveNowOptions) {}
func (c *fakeCC) Target() string                        { return "bench:///svc" }

// waitPicker waits (up to 10s) for a READY picker over all n connections:
// it picks n times and counts distinct connections.
func (c *fakeCC) waitPicker(n int) balancer.Picker {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		st := c.state
		c.mu.Unlock()
		if st.ConnectivityState == connectivity.Ready && st.Picker != nil {
			seen := map[balancer.SubConn]bool{}
			for i := 0; i < 2*n; i++ {
				if r, err := st.Picker.Pick(balancer.PickInfo{Ctx: context.Background()}); err == nil {
					seen[r.SubConn] = true
				}
			}
			if len(seen) == n {
				return st.Picker
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// fakeSC turns READY as soon as it is asked to connect.
type fakeSC struct {
	balancer.SubConn
	addr     string
	listener func(balancer.SubConnState)
}

// Both run outside the caller, as gRPC delivers state changes: the
// balancer holds its lock while it asks.
func (s *fakeSC) Connect() {
	go s.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
}
func (s *fakeSC) RegisterHealthListener(l func(balancer.SubConnState)) {
	go l(balancer.SubConnState{ConnectivityState: connectivity.Ready})
}
func (s *fakeSC) Shutdown()                          {}
func (s *fakeSC) UpdateAddresses([]resolver.Address) {}
