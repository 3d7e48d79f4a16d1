package grpcctx

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// flakyServer answers Unavailable while broken.
type flakyServer struct {
	testServer
	broken atomic.Bool
}

func (s *flakyServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.broken.Load() {
		s.hits.Add(1)
		return nil, status.Error(codes.Unavailable, "broken")
	}
	return s.testServer.UnaryCall(ctx, req)
}

// manualClock readmits when the test says so.
type manualClock struct {
	mu     sync.Mutex
	timers []func()
}

func (c *manualClock) Now() time.Time { return time.Now() }

func (c *manualClock) AfterFunc(_ time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, f)
	return func() bool { return false }
}

func (c *manualClock) fire() {
	c.mu.Lock()
	fs := c.timers
	c.timers = nil
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func TestBalancer_EjectsAnUnavailableBackend(t *testing.T) {
	reg := graylb.NewRegistry()
	bad := &flakyServer{testServer: testServer{name: "p3"}}
	bad.broken.Store(true)
	grayBad := &flakyServer{testServer: testServer{name: "g1"}}
	grayBad.broken.Store(true)
	serve(t, reg, "svc", &testServer{name: "p1"}, nil)
	serve(t, reg, "svc", &testServer{name: "p2"}, nil)
	serveFlaky(t, reg, "svc", bad, nil)
	serveFlaky(t, reg, "svc", grayBad, map[string]string{"gray": "true"})
	clk := &manualClock{}
	var fellBack atomic.Int64
	lb, c := dialLB(t, reg, "svc", graylb.WithOutlierDetection(graylb.OutlierConfig{Clock: clk}),
		graylb.WithObserver(func(_ string, _ graylb.Kind, o graylb.Outcome) {
			if o == graylb.FellBack {
				fellBack.Add(1)
			}
		}))
	changes := make(chan string, 8)
	defer adapter.For(lb).OnEjectionChange(func(s string) { changes <- s })()

	waitEjected := func() {
		t.Helper()
		select {
		case <-changes:
		case <-time.After(5 * time.Second):
			t.Fatal("no ejection")
		}
	}
	ok := 0
	const n = 1000
	for range n {
		if id, err := call(t, c, "false"); err == nil {
			ok++
			require.True(t, strings.HasPrefix(id, "p"), "prod reached %s", id)
		}
	}
	waitEjected()
	require.Eventually(t, func() bool {
		before := bad.hits.Load()
		call(t, c, "false")
		call(t, c, "false")
		call(t, c, "false")
		return bad.hits.Load() == before
	}, 5*time.Second, time.Millisecond)
	t.Logf("prod: %d of %d succeeded, the broken one answered %d", ok, n, bad.hits.Load())
	require.GreaterOrEqual(t, float64(ok)/n, 0.99)
	before := bad.hits.Load()
	for range 100 {
		_, err := call(t, c, "false")
		require.NoError(t, err)
	}
	require.Equal(t, before, bad.hits.Load())

	// The only gray instance fails: after 5 failures gray falls back to prod.
	for range 5 {
		_, err := call(t, c, "true")
		require.Equal(t, codes.Unavailable, status.Code(err))
	}
	waitEjected()
	// The balancer swaps its Router in a watcher of its own, after ours.
	require.Eventually(t, func() bool { _, err := call(t, c, "true"); return err == nil }, 5*time.Second, time.Millisecond)
	for range 20 {
		id, err := call(t, c, "true")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(id, "p"))
	}
	require.Positive(t, fellBack.Load())

	// Healed and readmitted: traffic again.
	bad.broken.Store(false)
	grayBad.broken.Store(false)
	clk.fire()
	waitEjected()
	require.Eventually(t, func() bool { id, _ := call(t, c, "true"); return id == "g1" }, 5*time.Second, time.Millisecond)
	// The prod readmission may be a second rebuild: wait for it too.
	require.Eventually(t, func() bool { id, _ := call(t, c, "false"); return id == "p3" }, 5*time.Second, time.Millisecond,
		"the healed backend gets traffic again")
}

func serveFlaky(t *testing.T, reg *graylb.Registry, service string, srv *flakyServer, md map[string]string) {
	t.Helper()
	port := serveRaw(t, srv, ServerOptions(nil))
	require.NoError(t, reg.Register(graylb.NewInstance(service, "127.0.0.1", port, md)))
}

func TestBalancer_FailureCodesConfig(t *testing.T) {
	cfg, err := builder{}.ParseConfig(json.RawMessage(`{"failureCodes":["UNAVAILABLE",13]}`))
	require.NoError(t, err)
	set := cfg.(*lbConfig).set
	require.True(t, set.failed(status.Error(codes.Unavailable, "")))
	require.True(t, set.failed(status.Error(codes.Internal, "")))
	require.False(t, set.failed(status.Error(codes.Unknown, "")))
	require.False(t, set.failed(nil))
	_, err = builder{}.ParseConfig(json.RawMessage(`{"failureCodes":["NOPE"]}`))
	require.Error(t, err)
	cfg, err = builder{}.ParseConfig(nil)
	require.NoError(t, err)
	require.True(t, cfg.(*lbConfig).set.failed(status.Error(codes.DataLoss, "")))

	var sc struct {
		LB []map[string]json.RawMessage `json:"loadBalancingConfig"`
	}
	require.NoError(t, json.Unmarshal([]byte(ServiceConfigWithFailureCodes(codes.Unavailable, codes.DeadlineExceeded)), &sc))
	cfg, err = builder{}.ParseConfig(sc.LB[0][Name])
	require.NoError(t, err)
	require.True(t, cfg.(*lbConfig).set.failed(status.Error(codes.DeadlineExceeded, "")))
	require.False(t, cfg.(*lbConfig).set.failed(status.Error(codes.Internal, "")))
}

// slowServer answers after a delay.
type slowServer struct {
	testServer
	delay time.Duration
}

func (s *slowServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	time.Sleep(s.delay) // must sleep: the backend's latency is what P2C measures
	return s.testServer.UnaryCall(ctx, req)
}

// TestBalancer_P2CAvoidsTheSlowBackend: with policy.P2C the picker's Done
// carries each call's start, so the slow backend's latency steers traffic
// away from it, and every call leaves the in-flight count.
func TestBalancer_P2CAvoidsTheSlowBackend(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "fast1"}, nil)
	serve(t, reg, "svc", &testServer{name: "fast2"}, nil)
	slow := &slowServer{testServer: testServer{name: "slow"}, delay: 20 * time.Millisecond}
	port := serveRaw(t, slow, ServerOptions(nil))
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, nil)))
	lb, c := dialLB(t, reg, "svc", graylb.WithPolicy(policy.P2C()))
	// Until every connection is READY, the picker sees fewer candidates.
	require.Eventually(t, func() bool { id, _ := call(t, c, "-"); return id == "slow" }, 5*time.Second, time.Millisecond)
	var wg sync.WaitGroup
	var total atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := call(t, c, "-"); err == nil {
					total.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	share := float64(slow.hits.Load()) / float64(total.Load())
	t.Logf("slow backend: %d of %d calls", slow.hits.Load(), total.Load())
	require.Less(t, share, 0.1)
	r, err := adapter.For(lb).Route(context.Background(), "svc", nil)
	require.NoError(t, err)
	for i := range r.Instances() {
		cl := r.Call(i)
		require.EqualValues(t, 1, cl.Stats().InFlight(), "every call was done")
		cl.End(adapter.Cancelled)
	}
}

// A registered gray instance that refuses connections: its failed
// connection attempts count as its failures, so outlier detection ejects
// it and gray RPCs fall back to prod, as over HTTP (before, no RPC reached
// it, nothing was reported and every gray RPC failed).
func TestBalancer_UnreachableGrayInstanceIsEjected(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "p1"}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, map[string]string{"gray": "true"})))
	_, c := dialLB(t, reg, "svc", graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1}))
	require.Eventually(t, func() bool {
		id, err := call(t, c, "true")
		return err == nil && id == "p1"
	}, 10*time.Second, 10*time.Millisecond, "gray never fell back to prod")
	for i := 0; i < 20; i++ {
		id, err := call(t, c, "true")
		require.NoError(t, err)
		require.Equal(t, "p1", id)
	}
}
