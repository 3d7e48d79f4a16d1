package grpcctx

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The balancer reports each RPC to the LoadBalancer's CallObserver, by
// the kind of the instance that served it.
func TestBalancer_CallObserver(t *testing.T) {
	reg := graylb.NewRegistry()
	prod := serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	grayIn := serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	var mu sync.Mutex
	seen := map[string]int{}
	obs := func(service string, inst graylb.Instance, kind graylb.Kind, ok bool, latency time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, "svc", service)
		assert.True(t, latency > 0 && latency < time.Minute, "latency %v", latency)
		seen[inst.Addr()+" "+kind.String()+" "+map[bool]string{true: "ok", false: "error"}[ok]]++
	}
	c := dial(t, reg, "svc", graylb.WithCallObserver(obs))
	for i := 0; i < 3; i++ {
		got, err := call(t, c, "true")
		require.NoError(t, err)
		require.Equal(t, "gray", got)
		got, err = call(t, c, "false")
		require.NoError(t, err)
		require.Equal(t, "prod", got)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{grayIn.Addr() + " gray ok": 3, prod.Addr() + " prod ok": 3}, seen)
}

// hangServer answers nothing until its call's context ends.
type hangServer struct{ testServer }

func (s *hangServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// An RPC that runs past its caller's deadline is told to the CallObserver
// as failed (DeadlineExceeded is not a failure of the instance by default,
// but its caller saw the call fail, and a gray build that hangs must show
// in the call metrics a rollout judges); a cancelled one is not told.
func TestBalancer_CallObserverSeesTimedOutCalls(t *testing.T) {
	reg := graylb.NewRegistry()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, &hangServer{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	addr := lis.Addr().(*net.TCPAddr)
	in := graylb.NewInstance("svc", "127.0.0.1", addr.Port, map[string]string{"gray": "true"})
	require.NoError(t, reg.Register(in))
	var mu sync.Mutex
	var seen []string
	obs := func(service string, inst graylb.Instance, kind graylb.Kind, ok bool, latency time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, inst.Addr()+" "+kind.String()+" "+map[bool]string{true: "ok", false: "error"}[ok])
	}
	c := dial(t, reg, "svc", graylb.WithCallObserver(obs))
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "true"), 300*time.Millisecond)
	defer cancel()
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	ctx, cancel = context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "gray", "true"))
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	require.Equal(t, codes.Canceled, status.Code(err), "%v", err)

	// A second call past its deadline ends after the cancelled one: once
	// it is told, a wrongly told cancelled call would have been too.
	ctx, cancel = context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "true"), 50*time.Millisecond)
	defer cancel()
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= 2 }, 5*time.Second, time.Millisecond,
		"the calls past their deadline were not told")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{in.Addr() + " gray error", in.Addr() + " gray error"}, seen)
}
