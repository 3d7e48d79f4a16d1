package grpcctx

import (
	"context"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// oneKindServer answers Unavailable to gray-marked calls only.
type oneKindServer struct{ testServer }

func (s *oneKindServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("gray"); len(v) > 0 && v[0] == "true" {
		s.hits.Add(1)
		return nil, status.Error(codes.Unavailable, "gray build of a dependency missing")
	}
	return s.testServer.UnaryCall(ctx, req)
}

// busyServer answers ResourceExhausted to everything.
type busyServer struct{ testServer }

func (s *busyServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.hits.Add(1)
	return nil, status.Error(codes.ResourceExhausted, "overloaded")
}

// No gray instance, two prod ones, one of which answers Unavailable to
// gray-marked calls only: it is taken out for gray calls (each prod
// success between them reset its count of failures in a row, so it never
// was: half the gray calls failed).
func TestBalancer_InstanceFailingOneKindOfRequest(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "p1"}, nil)
	port := serveRaw(t, &oneKindServer{testServer{name: "p2"}}, ServerOptions(nil))
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, nil)))
	_, c := dialLB(t, reg, "svc", graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.Eventually(t, func() bool { id, _ := call(t, c, "false"); return id == "p2" }, 5*time.Second, time.Millisecond)
	failed := 0
	for i := range 300 {
		if _, err := call(t, c, "true"); err != nil && i >= 30 {
			failed++
		}
		_, err := call(t, c, "false")
		require.NoError(t, err)
	}
	require.Zero(t, failed, "gray calls failed after the first 30")
}

// An instance answering ResourceExhausted to everything, beside a healthy
// one, gets at most a tenth of the calls once it said so, with P2C (a
// fast refusal looked cheapest: it got 91 %) and round robin (50 %).
func TestBalancer_OverloadedInstanceAttractsNoTraffic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy policy.Policy
	}{{"p2c", policy.P2C()}, {"round-robin", policy.RoundRobin()}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			busy := &busyServer{testServer{name: "busy"}}
			port := serveRaw(t, busy, ServerOptions(nil))
			require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, nil)))
			serve(t, reg, "svc", &testServer{name: "p1"}, nil)
			_, c := dialLB(t, reg, "svc", graylb.WithPolicy(tc.policy), graylb.WithOutlierDetection(graylb.OutlierConfig{}))
			// Both connections ready and the busy one heard from.
			require.Eventually(t, func() bool { call(t, c, "false"); return busy.hits.Load() > 0 }, 5*time.Second, time.Millisecond)
			require.Eventually(t, func() bool { id, _ := call(t, c, "false"); return id == "p1" }, 5*time.Second, time.Millisecond)
			before := busy.hits.Load()
			for range 500 {
				call(t, c, "false")
			}
			t.Logf("the overloaded instance got %d of 500 calls", busy.hits.Load()-before)
			require.LessOrEqual(t, busy.hits.Load()-before, int64(50))
		})
	}
}
