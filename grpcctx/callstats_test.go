package grpcctx

import (
	"context"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/require"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// heldServer holds each call until the test releases it.
type heldServer struct {
	testServer
	entered chan struct{}
	release chan struct{}
}

func (s *heldServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.testServer.UnaryCall(ctx, req)
}

// statsOf returns the Stats the LoadBalancer keeps for service's only
// instance, read through a call it starts and ends without a result.
func statsOf(t *testing.T, lb *graylb.LoadBalancer, service string) *policy.Stats {
	t.Helper()
	r, err := adapter.For(lb).Route(context.Background(), service, nil)
	require.NoError(t, err)
	c := r.Call(0)
	require.NotNil(t, c.Stats())
	c.End(adapter.Cancelled)
	return c.Stats()
}

// waitUntil polls cond until it holds or 5 s passed.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, "after 5s: %s", what)
}

// Every RPC is one Call whatever the policy: with outlier detection and
// round robin (no latency-aware policy, no CallObserver) an RPC counts in
// flight while it runs and feeds its latency when it ends, as over HTTP.
func TestBalancer_EveryPolicyTracksCalls(t *testing.T) {
	for _, pol := range []struct {
		name   string
		policy policy.Policy
	}{{"round robin", policy.RoundRobin()}, {"weighted", policy.WeightedRoundRobin()}, {"p2c", policy.P2C()}} {
		t.Run(pol.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			srv := &heldServer{testServer: testServer{name: "p1"}, entered: make(chan struct{}, 1), release: make(chan struct{})}
			port := serveRaw(t, srv, ServerOptions(nil))
			require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, nil)))
			lb, c := dialLB(t, reg, "svc", graylb.WithPolicy(pol.policy), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1000}))
			errc := make(chan error, 1)
			go func() { _, err := call(t, c, "false"); errc <- err }()
			select {
			case <-srv.entered:
			case <-time.After(5 * time.Second):
				t.Fatal("the RPC never reached the server")
			}
			st := statsOf(t, lb, "svc")
			require.EqualValues(t, 1, st.InFlight(), "the RPC running is in flight")
			close(srv.release)
			require.NoError(t, <-errc)
			waitUntil(t, "the RPC left the in-flight count", func() bool { return st.InFlight() == 0 })
			require.Positive(t, st.Latency(), "the RPC fed its latency")
		})
	}
}
