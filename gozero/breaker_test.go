package gozero_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// failing answers every call with Internal: a gray build that fails.
type failing struct {
	testgrpc.UnimplementedTestServiceServer
}

func (failing) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return nil, status.Error(codes.Internal, "the gray build fails")
}

// go-zero's client breaker is one per target and method
// (zrpc/internal/clientinterceptors.BreakerInterceptor names it after
// cc.Target() and the method): a failing gray build opens it for the prod
// calls of the same method, which graylb routed to a healthy prod
// instance. With Middlewares.Breaker off, prod calls are unaffected.
// docs/go-zero.md says so; this test shows it (and fails if a go-zero
// version makes the breaker per instance).
func TestZrpcBreakerIsSharedByKinds(t *testing.T) {
	for _, breakerOn := range []bool{true, false} {
		// A service name of its own per case: go-zero's breakers are
		// process-wide, by name.
		service := "svc-breaker-off"
		if breakerOn {
			service = "svc-breaker-on"
		}
		reg := graylb.NewRegistry()
		// go-zero's server breakers are process-wide too, by method: the
		// gray server's would refuse the prod server's calls in this one
		// process (not in a deployment, one instance a process).
		noServerBreaker := func(c *zrpc.RpcServerConf) { c.Middlewares.Breaker = false }
		zrpcServerWith(t, reg, service, false, &named{name: "prod"}, noServerBreaker, nil)
		zrpcServerWith(t, reg, service, true, failing{}, noServerBreaker, nil)
		lb, err := graylb.New(reg)
		require.NoError(t, err)
		t.Cleanup(func() { lb.Close() })
		c := clientConf(t, gozero.Target(service))
		c.Middlewares.Breaker = breakerOn
		cli, err := zrpc.NewClient(c, gozero.ClientOptions(lb)...)
		require.NoError(t, err)
		t.Cleanup(func() { cli.Conn().Close() })
		client := testgrpc.NewTestServiceClient(cli.Conn())

		gray := metadata.AppendToOutgoingContext(context.Background(), "gray", "true")
		for i := 0; i < 200; i++ {
			_, err := client.UnaryCall(gray, &testgrpc.SimpleRequest{})
			require.Error(t, err)
		}
		refused := 0
		for i := 0; i < 50; i++ {
			r, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			if err != nil {
				refused++
				continue
			}
			assert.Equal(t, "prod", r.GetServerId())
		}
		if breakerOn {
			assert.Positive(t, refused, "go-zero's breaker, opened by gray failures, refuses prod calls")
		} else {
			assert.Zero(t, refused, "without go-zero's breaker no prod call fails")
		}
	}
}
