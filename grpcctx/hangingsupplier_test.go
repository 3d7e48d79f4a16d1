package grpcctx

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// hangingSupplier's lookups block until their context ends (a registry
// that accepts the connection and never answers).
type hangingSupplier struct {
	calls, ended atomic.Int32
}

func (s *hangingSupplier) Instances(ctx context.Context, _ string) ([]graylb.Instance, error) {
	s.calls.Add(1)
	<-ctx.Done()
	s.ended.Add(1)
	return nil, ctx.Err()
}

func (s *hangingSupplier) Watch(string, func([]graylb.Instance)) (func(), error) {
	return func() {}, nil
}

// TestResolver_HangingLookup: a ClientConn whose service's lookup hangs
// fails an RPC at its deadline, and closes within 1 s, cancelling the
// lookup when its LoadBalancer closes (the resolver's first read used to
// block grpc-go's resolver goroutine, and ClientConn.Close with it, for
// as long as the registry hung).
func TestResolver_HangingLookup(t *testing.T) {
	sup := &hangingSupplier{}
	lb, err := graylb.New(sup)
	require.NoError(t, err)
	conn, err := grpc.NewClient("graylb:///svc", append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	c := testgrpc.NewTestServiceClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	cancel()
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	require.Less(t, time.Since(start), time.Second, "the RPC outlived its deadline")
	require.Eventually(t, func() bool { return sup.calls.Load() > 0 }, time.Second, time.Millisecond)

	closed := make(chan struct{})
	start = time.Now()
	go func() { conn.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("ClientConn.Close blocked on a hanging lookup")
	}
	t.Logf("ClientConn.Close took %v", time.Since(start))
	lb.Close()
	require.Eventually(t, func() bool { return sup.ended.Load() == sup.calls.Load() }, time.Second, time.Millisecond,
		"a lookup outlived its LoadBalancer")
}
