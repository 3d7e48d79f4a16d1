package graylbkratos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"testing"
	"time"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/go-kratos/kratos/v2/transport"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/filter"
	graylbkratos "github.com/graylb/graylb/kratos"
	"github.com/graylb/graylb/policy"
)

// header is a transport.Header over a map.
type header map[string]string

func (h header) Get(k string) string { return h[k] }
func (h header) Set(k, v string)     { h[k] = v }
func (h header) Add(k, v string)     { h[k] = v }
func (h header) Keys() []string {
	var out []string
	for k := range h {
		out = append(out, k)
	}
	return out
}
func (h header) Values(k string) []string { return []string{h[k]} }

// fakeTransport is a client transport whose request header is h.
type fakeTransport struct{ h header }

func (fakeTransport) Kind() transport.Kind              { return transport.KindGRPC }
func (fakeTransport) Endpoint() string                  { return "discovery:///svc" }
func (fakeTransport) Operation() string                 { return "/svc/Call" }
func (t fakeTransport) RequestHeader() transport.Header { return t.h }
func (fakeTransport) ReplyHeader() transport.Header     { return header{} }

// callCtx is the context of a client call whose header is h.
func callCtx(h header) context.Context {
	return transport.NewClientContext(context.Background(), fakeTransport{h})
}

// nodes returns Kratos nodes of svc: gray[i] says whether node i is gray.
func nodes(svc string, gray ...bool) []selector.Node {
	out := make([]selector.Node, len(gray))
	for i, g := range gray {
		out[i] = selector.NewNode("grpc", "127.0.0.1:"+strconv.Itoa(9000+i), &registry.ServiceInstance{
			Name: svc, Metadata: map[string]string{"gray": strconv.FormatBool(g)}})
	}
	return out
}

func isGrayNode(n selector.Node) bool { return graylb.IsGray(n.Metadata()["gray"]) }

func newSelector(t testing.TB, lb *graylb.LoadBalancer) selector.Selector {
	t.Helper()
	b := graylbkratos.NewBuilder(lb)
	t.Cleanup(b.Close)
	return b.Build()
}

func TestSelectorGrayRule(t *testing.T) {
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{})
	s := newSelector(t, lb)
	if _, _, err := s.Select(context.Background()); !errors.Is(err, selector.ErrNoAvailable) {
		t.Fatalf("before Apply: %v", err)
	}
	s.Apply(nodes("svc", false, true, false))
	for i := 0; i < 100; i++ {
		n, done, err := s.Select(callCtx(header{}))
		if err != nil || isGrayNode(n) {
			t.Fatalf("prod call: %v, %v", n, err)
		}
		done(context.Background(), selector.DoneInfo{})
		n, _, err = s.Select(callCtx(header{"gray": "true"}))
		if err != nil || !isGrayNode(n) {
			t.Fatalf("gray call: %v, %v", n, err)
		}
		// A value the program put on the context counts too.
		n, _, err = s.Select(graylb.WithValue(context.Background(), "gray", "true"))
		if err != nil || !isGrayNode(n) {
			t.Fatalf("gray context value: %v, %v", n, err)
		}
	}
	// Only gray nodes: a prod call fails, naming the service, with an
	// error that is both Kratos' and graylb's.
	s.Apply(nodes("svc", true))
	_, _, err := s.Select(callCtx(header{}))
	if !errors.Is(err, selector.ErrNoAvailable) || !errors.Is(err, graylb.ErrNoInstance) || kerrors.Code(err) != 503 {
		t.Fatalf("prod call without prod nodes: %v (code %d)", err, kerrors.Code(err))
	}
	// Only prod nodes: a gray call falls back to them.
	s.Apply(nodes("svc", false))
	if n, _, err := s.Select(callCtx(header{"gray": "true"})); err != nil || isGrayNode(n) {
		t.Fatalf("gray call without gray nodes: %v, %v", n, err)
	}
	// Nodes without a service name (a client dialled an address).
	s.Apply([]selector.Node{selector.NewNode("http", "127.0.0.1:8000", nil)})
	if n, _, err := s.Select(context.Background()); err != nil || n.Address() != "127.0.0.1:8000" {
		t.Fatalf("a direct node: %v, %v", n, err)
	}
	// Direct nodes at addresses that are no valid service name (a gRPC
	// client dialled an IPv6 address): Kratos' own selectors route there.
	for _, addr := range []string{"[::1]:8000", "[fe80::1%eth0]:8000"} {
		s.Apply([]selector.Node{selector.NewNode("grpc", addr, nil)})
		if n, _, err := s.Select(context.Background()); err != nil || n.Address() != addr {
			t.Fatalf("a direct node at %s: %v, %v", addr, n, err)
		}
	}
	// An empty list.
	s.Apply(nil)
	if _, _, err := s.Select(context.Background()); !errors.Is(err, selector.ErrNoAvailable) {
		t.Fatalf("no node: %v", err)
	}
}

// TestSelectorProperty: over random node lists and request values, a prod
// call never gets a gray node, a gray call gets a gray node whenever the
// list has one, and a call fails only when its kind has no node.
func TestSelectorProperty(t *testing.T) {
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{})
	s := newSelector(t, lb)
	rng := rand.New(rand.NewSource(1))
	values := []string{"", "true", "TRUE", "false", "yes", " true", "1"}
	for round := 0; round < 300; round++ {
		gray := make([]bool, 1+rng.Intn(8))
		grays := 0
		for i := range gray {
			gray[i] = rng.Intn(3) == 0
			if gray[i] {
				grays++
			}
		}
		s.Apply(nodes("svc", gray...))
		for k := 0; k < 10; k++ {
			v := values[rng.Intn(len(values))]
			n, _, err := s.Select(callCtx(header{"gray": v}))
			switch {
			case graylb.IsGray(v) && grays > 0:
				if err != nil || !isGrayNode(n) {
					t.Fatalf("%v, gray %q: %v, %v", gray, v, n, err)
				}
			case graylb.IsGray(v):
				if err != nil {
					t.Fatalf("%v, gray %q without gray nodes: %v", gray, v, err)
				}
			case grays == len(gray):
				if err == nil {
					t.Fatalf("%v, prod %q picked %v", gray, v, n)
				}
			default:
				if err != nil || isGrayNode(n) {
					t.Fatalf("%v, prod %q: %v, %v", gray, v, n, err)
				}
			}
		}
	}
}

// TestSelectorFollowsRules: a rules change reaches the Selectors built
// before it, at their next Select.
func TestSelectorFollowsRules(t *testing.T) {
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{})
	s := newSelector(t, lb)
	s.Apply(nodes("svc", false, true))
	if n, _, err := s.Select(callCtx(header{"gray": "true"})); err != nil || !isGrayNode(n) {
		t.Fatalf("gray call: %v, %v", n, err)
	}
	if err := lb.SetRules(graylb.Rules{Closed: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if n, _, err := s.Select(callCtx(header{"gray": "true"})); err != nil || isGrayNode(n) {
			t.Fatalf("gray call with routing closed: %v, %v", n, err)
		}
	}
	if err := lb.SetRules(graylb.Rules{GrayUsers: []string{"u1"}}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := s.Select(callCtx(header{"uid": "u1"})); err != nil || !isGrayNode(n) {
		t.Fatalf("a gray user after the change: %v, %v", n, err)
	}
}

// TestSelectorVersion: version routing over the nodes' Version.
func TestSelectorVersion(t *testing.T) {
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{}, graylb.WithFilters(filter.Version()))
	s := newSelector(t, lb)
	var list []selector.Node
	for i, v := range []string{"v1", "v2"} {
		list = append(list, selector.NewNode("grpc", "127.0.0.1:"+strconv.Itoa(9000+i),
			&registry.ServiceInstance{Name: "svc", Version: v}))
	}
	s.Apply(list)
	for i := 0; i < 10; i++ {
		if n, _, err := s.Select(callCtx(header{"version": "v2"})); err != nil || n.Version() != "v2" {
			t.Fatalf("version v2: %v, %v", n, err)
		}
	}
}

// TestSelectorVersionKey: a node's Version counts under the metadata key
// the LoadBalancer's VersionFilter reads, renamed or not, and under the
// request key it reads.
func TestSelectorVersionKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []filter.VersionOption
		header string
	}{
		{"key renamed", []filter.VersionOption{filter.WithVersionKey("app-version")}, "version"},
		{"key and header renamed", []filter.VersionOption{filter.WithVersionKey("app-version"), filter.WithVersionHeader("x-app-version")}, "x-app-version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := newLB(t, graylb.NewRegistry(), graylb.Rules{}, graylb.WithFilters(filter.Version(tc.opts...)))
			s := newSelector(t, lb)
			var list []selector.Node
			for i, v := range []string{"v1", "v2"} {
				list = append(list, selector.NewNode("grpc", "127.0.0.1:"+strconv.Itoa(9000+i),
					&registry.ServiceInstance{Name: "svc", Version: v}))
			}
			s.Apply(list)
			v2 := 0
			for i := 0; i < 50; i++ {
				n, _, err := s.Select(callCtx(header{tc.header: "v2"}))
				if err != nil {
					t.Fatal(err)
				}
				if n.Version() == "v2" {
					v2++
				}
			}
			if v2 != 50 {
				t.Fatalf("%d of 50 picks of a %s: v2 call reached v2", v2, tc.header)
			}
		})
	}
	// A node whose metadata names its version under the key keeps it.
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{}, graylb.WithFilters(filter.Version(filter.WithVersionKey("app-version"))))
	s := newSelector(t, lb)
	s.Apply([]selector.Node{
		selector.NewNode("grpc", "127.0.0.1:9000", &registry.ServiceInstance{Name: "svc", Version: "v2"}),
		selector.NewNode("grpc", "127.0.0.1:9001", &registry.ServiceInstance{Name: "svc", Version: "v1",
			Metadata: map[string]string{"app-version": "v2"}}),
		selector.NewNode("grpc", "127.0.0.1:9002", &registry.ServiceInstance{Name: "svc", Version: "v1"}),
	})
	for i := 0; i < 50; i++ {
		n, _, err := s.Select(callCtx(header{"version": "v2"}))
		if err != nil || n.Address() == "127.0.0.1:9002" {
			t.Fatalf("a v2 call reached %v, %v", n, err)
		}
	}
}

// TestSelectorNodeFilter: a call's NodeFilters narrow what graylb's
// routing left and never widen it.
func TestSelectorNodeFilter(t *testing.T) {
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{})
	s := newSelector(t, lb)
	list := nodes("svc", false, false, true)
	s.Apply(list)
	only := func(addr string) selector.NodeFilter {
		return func(_ context.Context, ns []selector.Node) []selector.Node {
			var out []selector.Node
			for _, n := range ns {
				if n.Address() == addr {
					out = append(out, n)
				}
			}
			return out
		}
	}
	for i := 0; i < 10; i++ {
		n, _, err := s.Select(callCtx(header{}), selector.WithNodeFilter(only("127.0.0.1:9001")))
		if err != nil || n.Address() != "127.0.0.1:9001" {
			t.Fatalf("filtered: %v, %v", n, err)
		}
	}
	// The gray node is not a prod call's, whatever the filter keeps.
	if n, _, err := s.Select(callCtx(header{}), selector.WithNodeFilter(only("127.0.0.1:9002"))); err == nil {
		t.Fatalf("a filter widened a prod call to %v", n)
	}
	foreign := func(context.Context, []selector.Node) []selector.Node {
		return []selector.Node{selector.NewNode("grpc", "127.0.0.1:9999", &registry.ServiceInstance{Name: "svc"})}
	}
	if n, _, err := s.Select(callCtx(header{}), selector.WithNodeFilter(foreign)); err == nil {
		t.Fatalf("a filter's own node was picked: %v", n)
	}
}

// TestSelectorEjection: done reports outcomes; failures eject the node,
// and so does a call its caller's deadline ended before the node answered
// (what hangs is a failure); cancelled calls and answers that are not
// failures (a 504 the node sent, 4xx, 501) do not count.
func TestSelectorEjection(t *testing.T) {
	bad := "127.0.0.1:9000"
	setup := func() (selector.Selector, func(error)) {
		reg := graylb.NewRegistry()
		list := nodes("svc", false, false)
		for _, n := range list {
			host, port := "127.0.0.1", n.Address()[len("127.0.0.1:"):]
			p, _ := strconv.Atoi(port)
			if err := reg.Register(graylb.NewInstance("svc", host, p, map[string]string{"gray": "false"})); err != nil {
				t.Fatal(err)
			}
		}
		lb := newLB(t, reg, graylb.Rules{}, graylb.WithOutlierDetection(graylb.OutlierConfig{
			ConsecutiveFailures: 3, BaseEjectionTime: time.Hour, MaxEjectionPercent: 50}))
		s := newSelector(t, lb)
		s.Apply(list)
		report := func(err error) {
			for i := 0; i < 2; i++ { // round robin: each node once
				n, done, e := s.Select(callCtx(header{}))
				if e != nil {
					t.Fatal(e)
				}
				if n.Address() == bad {
					done(context.Background(), selector.DoneInfo{Err: err})
				} else {
					done(context.Background(), selector.DoneInfo{})
				}
			}
		}
		return s, report
	}
	ejected := func(s selector.Selector) bool {
		for i := 0; i < 20; i++ {
			n, _, err := s.Select(callCtx(header{}))
			if err != nil {
				t.Fatal(err)
			}
			if n.Address() == bad {
				return false
			}
		}
		return true
	}
	s, report := setup()
	for _, err := range []error{context.Canceled, kerrors.ClientClosed("", ""), kerrors.GatewayTimeout("", ""),
		kerrors.NotFound("", ""), kerrors.New(501, "", "")} {
		for i := 0; i < 5; i++ {
			report(err)
		}
	}
	if ejected(s) {
		t.Fatal("ejected after outcomes that are not failures")
	}
	for i := 0; i < 3; i++ {
		report(kerrors.ServiceUnavailable("", ""))
	}
	if !ejected(s) {
		t.Fatal("not ejected after 3 failures")
	}
	s, report = setup()
	for i := 0; i < 3; i++ {
		report(fmt.Errorf("call: %w", context.DeadlineExceeded))
	}
	if !ejected(s) {
		t.Fatal("not ejected after 3 calls its caller's deadline ended without an answer")
	}
}

// TestSelectorP2C: with a latency-aware policy each call's done ends it.
func TestSelectorP2C(t *testing.T) {
	reg := graylb.NewRegistry()
	lb := newLB(t, reg, graylb.Rules{}, graylb.WithPolicy(policy.P2C()))
	s := newSelector(t, lb)
	s.Apply(nodes("svc", false, false, true))
	for i := 0; i < 50; i++ {
		n, done, err := s.Select(callCtx(header{}))
		if err != nil || isGrayNode(n) {
			t.Fatalf("%v, %v", n, err)
		}
		done(context.Background(), selector.DoneInfo{Err: errors.New("x")})
	}
}

// TestSelectorPeer: the picked node is set on the call's selector.Peer,
// as Kratos' own selector does.
func TestSelectorPeer(t *testing.T) {
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{})
	s := newSelector(t, lb)
	s.Apply(nodes("svc", false))
	var p selector.Peer
	ctx := selector.NewPeerContext(callCtx(header{}), &p)
	n, _, err := s.Select(ctx)
	if err != nil || p.Node != n {
		t.Fatalf("peer %v, picked %v, %v", p.Node, n, err)
	}
}

// TestSelectorAllocs: a pick on a stable list and its done allocate
// nothing, whatever the policy, with outlier detection and a CallObserver
// on or off.
func TestSelectorAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are not the program's")
	}
	for _, c := range []struct {
		name string
		opts []graylb.Option
	}{
		{"round robin", nil},
		{"round robin, outlier detection", []graylb.Option{graylb.WithOutlierDetection(graylb.OutlierConfig{})}},
		{"weighted, outlier detection", []graylb.Option{graylb.WithPolicy(policy.WeightedRoundRobin()), graylb.WithOutlierDetection(graylb.OutlierConfig{})}},
		{"p2c", []graylb.Option{graylb.WithPolicy(policy.P2C())}},
		{"call observer", []graylb.Option{graylb.WithCallObserver(func(string, graylb.Instance, graylb.Kind, bool, time.Duration) {})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var gray []bool
			for i := 0; i < 100; i++ {
				gray = append(gray, i%10 == 0)
			}
			// The registry lb reads holds the nodes: lb keeps their Stats
			// (outlier detection, P2C), so every variant but plain round
			// robin ends its calls through done.
			reg := graylb.NewRegistry()
			for i, n := range nodes("svc", gray...) {
				if err := reg.Register(graylb.NewInstance("svc", "127.0.0.1", 9000+i, n.Metadata())); err != nil {
					t.Fatal(err)
				}
			}
			lb := newLB(t, reg, graylb.Rules{CanaryPercent: 10}, c.opts...)
			s := newSelector(t, lb)
			s.Apply(nodes("svc", gray...))
			ctx := callCtx(header{"gray": "true"})
			rt, err := adapter.For(lb).Route(ctx, "svc", nil)
			if err != nil {
				t.Fatal(err)
			}
			probe := rt.Call(0)
			probe.End(adapter.Cancelled)
			if want := c.opts != nil; probe.Tracked() != want {
				t.Fatalf("calls tracked: %v, want %v", probe.Tracked(), want)
			}
			// What Kratos' clients pass without NodeFilters. (The variadic slice
			// of a call through the interface is the caller's allocation: made
			// once here.)
			none := []selector.SelectOption{selector.WithNodeFilter()}
			if a := testing.AllocsPerRun(200, func() {
				_, done, _ := s.Select(ctx, none...)
				done(ctx, selector.DoneInfo{})
			}); a != 0 {
				t.Fatalf("%v allocations per Select", a)
			}
		})
	}
}

// TestSelectorConcurrent: Apply, rules changes and Selects at once.
func TestSelectorConcurrent(t *testing.T) {
	lb := newLB(t, graylb.NewRegistry(), graylb.Rules{})
	s := newSelector(t, lb)
	s.Apply(nodes("svc", false, true))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s.Apply(nodes("svc", false, true, i%2 == 0))
			lb.SetRules(graylb.Rules{CanaryPercent: float64(i % 100)})
		}
	}()
	for i := 0; i < 2000; i++ {
		n, _, err := s.Select(callCtx(header{"gray": "false"}))
		if err != nil || isGrayNode(n) {
			close(stop)
			<-done
			t.Fatalf("prod call: %v, %v", n, err)
		}
	}
	close(stop)
	<-done
}
