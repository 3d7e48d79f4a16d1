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

// fakeCC embeds the interface and overrides what round_robin calls. Its
// fake SubConns turn READY on goroutines of their own, as gRPC delivers
// state changes; pending counts the deliveries not done yet, and cond
// tells waitPicker of each change.
type fakeCC struct {
	balancer.ClientConn
	mu      sync.Mutex
	cond    *sync.Cond
	state   balancer.State
	pending int // state deliveries started and not returned
	changes int // UpdateState calls and deliveries returned
}

func (c *fakeCC) init() {
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
	}
}

func (c *fakeCC) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	return &fakeSC{cc: c, addr: addrs[0].Addr, listener: opts.StateListener}, nil
}

func (c *fakeCC) UpdateState(s balancer.State) {
	c.mu.Lock()
	c.init()
	c.state = s
	c.changes++
	c.cond.Broadcast()
	c.mu.Unlock()
}

func (c *fakeCC) ResolveNow(resolver.ResolveNowOptions) {}
func (c *fakeCC) Target() string                        { return "bench:///svc" }

// deliver runs l(READY) on a goroutine of its own, counted in pending.
func (c *fakeCC) deliver(l func(balancer.SubConnState)) {
	c.mu.Lock()
	c.init()
	c.pending++
	c.mu.Unlock()
	go func() {
		l(balancer.SubConnState{ConnectivityState: connectivity.Ready})
		c.mu.Lock()
		c.pending--
		c.changes++
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
}

// waitPicker waits for a READY picker over all n connections: once every
// state delivery has returned, it picks 2n times and counts distinct
// connections; else it waits for the next change. It waits for events, not
// for a fixed time (a loaded machine delivers 10 000 states slowly), and
// gives up only after readyTimeout without any change.
func (c *fakeCC) waitPicker(n int) balancer.Picker {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	for {
		if c.pending == 0 && c.state.ConnectivityState == connectivity.Ready && c.state.Picker != nil {
			seen := map[balancer.SubConn]bool{}
			for i := 0; i < 2*n; i++ {
				if r, err := c.state.Picker.Pick(balancer.PickInfo{Ctx: context.Background()}); err == nil {
					seen[r.SubConn] = true
				}
			}
			if len(seen) == n {
				return c.state.Picker
			}
		}
		t := time.AfterFunc(readyTimeout, func() {
			c.mu.Lock()
			c.cond.Broadcast()
			c.mu.Unlock()
		})
		before := c.changes
		c.cond.Wait()
		t.Stop()
		if c.changes == before {
			return nil // readyTimeout passed without a change
		}
	}
}

// readyTimeout is how long waitPicker waits for a change before it gives
// up: a balancer that stops changing state never gets READY.
const readyTimeout = time.Minute

// fakeSC turns READY as soon as it is asked to connect.
type fakeSC struct {
	balancer.SubConn
	cc       *fakeCC
	addr     string
	listener func(balancer.SubConnState)
}

// Both run outside the caller, as gRPC delivers state changes: the
// balancer holds its lock while it asks.
func (s *fakeSC) Connect()                                             { s.cc.deliver(s.listener) }
func (s *fakeSC) RegisterHealthListener(l func(balancer.SubConnState)) { s.cc.deliver(l) }
func (s *fakeSC) Shutdown()                                            {}
func (s *fakeSC) UpdateAddresses([]resolver.Address)                   {}
