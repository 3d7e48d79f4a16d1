package grpcctx

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// forwarder is a gRPC gateway's handler that forwards the incoming
// metadata whole to the next service, as gateways that copy headers do.
type forwarder struct {
	testgrpc.UnimplementedTestServiceServer
	next testgrpc.TestServiceClient
}

func (f *forwarder) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return f.next.UnaryCall(metadata.NewOutgoingContext(ctx, md), req)
}

// One trust boundary per process, over gRPC: an edge server keyed
// gray-tag facing untrusted peers forwards incoming metadata to a client
// whose LoadBalancer is keyed gray; the caller's "gray: true" is not a key
// the edge reads. No such call reaches the gray instance.
func TestTrustBoundary_ForwardingGatewayWithTwoKeySets(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	edge, err := graylb.New(reg, graylb.WithGrayHeader("gray-tag"))
	require.NoError(t, err)
	defer edge.Close()
	_, c := dialLB(t, reg, "svc")
	// Both instances ready (a trusted gray call through the inner client).
	require.Eventually(t, func() bool { id, _ := call(t, c, "true"); return id == "gray" }, 5*time.Second, time.Millisecond)
	untrusted := WithTrusted(func(context.Context) bool { return false })
	port := serveRaw(t, &forwarder{next: c}, ServerOptions(edge, untrusted))
	gw, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer gw.Close()
	gc := testgrpc.NewTestServiceClient(gw)
	reached := 0
	for range 70 {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "true", "uid", "alice", "gray-tag", "true"), 5*time.Second)
		r, err := gc.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		cancel()
		require.NoError(t, err)
		if strings.HasPrefix(r.GetServerId(), "gray") {
			reached++
		}
	}
	assert.Zero(t, reached, "untrusted calls that reached the gray instance")
}
