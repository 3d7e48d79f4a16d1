package grpcctx

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// failingSupplier is a Registry whose lookups fail while down is set (a
// registry that cannot be reached as the ClientConn starts).
type failingSupplier struct {
	*graylb.Registry
	down  atomic.Bool
	calls atomic.Int32
}

func (s *failingSupplier) Instances(ctx context.Context, service string) ([]graylb.Instance, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, errors.New("registry unreachable")
	}
	return s.Registry.Instances(ctx, service)
}

// TestResolver_FailedFirstLookupRecovers: a ClientConn whose service's
// first lookup failed (the registry could not be reached) serves once the
// registry answers again: its RPCs fail meanwhile, its lookups are tried
// again with a back-off, and RPCs succeed within a few seconds of the
// registry's return (the failed lookup was never tried again: RPCs failed
// with its error for as long as the ClientConn lived).
func TestResolver_FailedFirstLookupRecovers(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	sup := &failingSupplier{Registry: reg}
	sup.down.Store(true)
	lb, err := graylb.New(sup, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	conn, err := grpc.NewClient("graylb:///svc", append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	defer conn.Close()
	c := testgrpc.NewTestServiceClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	cancel()
	require.Error(t, err, "an RPC while the registry cannot be reached")
	require.Positive(t, sup.calls.Load(), "no lookup")
	require.LessOrEqual(t, sup.calls.Load(), int32(5), "lookups within the first second: the retries back off")

	sup.down.Store(false)
	back := time.Now()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		assert.NoError(ct, err)
	}, 10*time.Second, 50*time.Millisecond, "no RPC served within 10 s of the registry's return")
	t.Logf("served %v after the registry's return (%d lookups)", time.Since(back).Round(time.Millisecond), sup.calls.Load())
}
