package grpcctx

import (
	"context"
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

// A LoadBalancer built with no option at all (no ContextHandler): the
// balancer and the interceptors read their own transport's keys, the
// outgoing metadata of the call and the incoming metadata the server
// interceptors kept, so gray metadata routes gray.
func dialNoOptions(t *testing.T, reg *graylb.Registry, service string) (*graylb.LoadBalancer, testgrpc.TestServiceClient) {
	t.Helper()
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	conn, err := grpc.NewClient("graylb:///"+service, append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(); lb.Close() })
	return lb, testgrpc.NewTestServiceClient(conn)
}

// unaryMD calls c with md as the call's outgoing metadata.
func unaryMD(t *testing.T, c testgrpc.TestServiceClient, md ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
	defer cancel()
	r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	return r.GetServerId()
}

// streamMD opens a stream on c with md as its outgoing metadata and
// returns the first message.
func streamMD(t *testing.T, c testgrpc.TestServiceClient, md ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
	defer cancel()
	st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	require.NoError(t, err)
	r, err := st.Recv()
	require.NoError(t, err)
	return string(r.GetPayload().GetBody())
}

func TestNoOptions_BalancerReadsTheOutgoingMetadata(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	lb, c := dialNoOptions(t, reg, "svc")
	// Both connections READY first: a kind whose connection is still
	// coming up would queue.
	for _, want := range []struct{ gray, name string }{{"false", "prod"}, {"true", "gray"}} {
		require.Eventually(t, func() bool { return unaryMD(t, c, "gray", want.gray) == want.name },
			5*time.Second, time.Millisecond, "%s never answered", want.name)
	}
	for i := 0; i < 4; i++ {
		assert.Equal(t, "gray", unaryMD(t, c, "gray", "true"), "gray: true")
		assert.Equal(t, "gray", unaryMD(t, c, "gray", "TRUE"))
		assert.Equal(t, "gray", streamMD(t, c, "gray", "true"), "gray: true on a stream")
		assert.Equal(t, "prod", unaryMD(t, c, "gray", "false"))
		assert.Equal(t, "prod", unaryMD(t, c))
	}
	// The user key is read too (by the interceptors and the picker).
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.Eventually(t, func() bool { return unaryMD(t, c, "uid", "alice") == "gray" }, 5*time.Second, time.Millisecond,
		"a gray user's uid metadata never reached gray")
	for i := 0; i < 4; i++ {
		assert.Equal(t, "gray", unaryMD(t, c, "uid", "alice"), "a gray user's uid metadata")
		assert.Equal(t, "gray", streamMD(t, c, "uid", "alice"))
		assert.Equal(t, "prod", unaryMD(t, c, "uid", "bob"))
	}
}

// A server with the server interceptors of a LoadBalancer built with no
// option calls the next service through it: the caller's gray metadata
// travels, and a trust boundary still drops an untrusted caller's.
func TestNoOptions_ServerInterceptorsKeepTheIncomingMetadata(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "b", &testServer{name: "B-prod"}, nil)
	serve(t, reg, "b", &testServer{name: "B-gray"}, map[string]string{"gray": "true"})
	lb, next := dialNoOptions(t, reg, "b")
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	trusted := func(ctx context.Context) bool {
		md, _ := metadata.FromIncomingContext(ctx)
		return len(md.Get("x-internal")) > 0
	}
	addr := serveWith(t, reg, "a", &testServer{name: "A", next: next}, nil, ServerOptions(lb, WithTrusted(trusted)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	a := testgrpc.NewTestServiceClient(conn)
	require.Eventually(t, func() bool { return unaryMD(t, a, "gray", "true", "x-internal", "1") == "A>B-gray" },
		5*time.Second, time.Millisecond, "a trusted caller's gray metadata never reached B-gray")
	for i := 0; i < 4; i++ {
		assert.Equal(t, "A>B-gray", unaryMD(t, a, "gray", "true", "x-internal", "1"), "trusted gray: true")
		assert.Equal(t, "A>B-gray", streamMD(t, a, "gray", "true", "x-internal", "1"), "trusted gray: true on a stream")
		assert.Equal(t, "A>B-gray", unaryMD(t, a, "uid", "alice", "x-internal", "1"), "trusted gray user")
		assert.Equal(t, "A>B-prod", unaryMD(t, a, "x-internal", "1"))
		for _, forged := range [][]string{{"gray", "true"}, {"GRAY", "true"}, {"uid", "alice"}} {
			assert.Equal(t, "A>B-prod", unaryMD(t, a, forged...), "untrusted %v", forged)
		}
	}
}
