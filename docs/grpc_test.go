package docs

import (
	"context"
	"log"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// docs/grpc.md: a client, a server, a server facing untrusted peers.
func TestGRPCTour(t *testing.T) {
	reg := graylb.NewRegistry()
	grpcService(t, reg, "user-service")
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	// Stand-ins for your own checks: the peer's address or certificate,
	// a verified token.
	isInternalPeer := func(ctx context.Context) bool {
		md, _ := metadata.FromIncomingContext(ctx)
		return len(md.Get("x-internal")) > 0
	}
	authenticatedUser := func(ctx context.Context) string {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("authorization"); len(v) > 0 && v[0] == "Bearer t-alice" {
			return "alice"
		}
		return ""
	}

	// snippet: grpc-tour
	conn, err := grpc.NewClient("graylb:///user-service",
		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpcctx.ServerOptions(lb)...) // keeps incoming keys for outgoing calls

	// facing untrusted peers: no routing key from them; the user id comes from your auth
	edge := grpc.NewServer(grpcctx.ServerOptions(lb, grpcctx.WithTrusted(isInternalPeer), grpcctx.WithUser(authenticatedUser))...)
	// end snippet

	defer conn.Close()
	next := testgrpc.NewTestServiceClient(conn)
	dial := func(addr string) testgrpc.TestServiceClient {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return testgrpc.NewTestServiceClient(c)
	}
	s := dial(serveGRPC(t, srv, &named{name: "a", next: next}))
	e := dial(serveGRPC(t, edge, &named{name: "edge", next: next}))
	for _, c := range []struct {
		client testgrpc.TestServiceClient
		md     []string
		want   string
	}{
		{s, []string{"gray", "true"}, "a → user-service-gray"},
		{s, nil, "a → user-service-prod"},
		{s, []string{"uid", "alice"}, "a → user-service-gray"},
		{e, []string{"gray", "true"}, "edge → user-service-prod"},
		{e, []string{"uid", "alice"}, "edge → user-service-prod"},
		{e, []string{"authorization", "Bearer t-alice"}, "edge → user-service-gray"},
		{e, []string{"gray", "true", "x-internal", "1"}, "edge → user-service-gray"},
	} {
		for i := 0; i < 2; i++ {
			if got := unary(t, c.client, c.md...); got != c.want {
				t.Errorf("%v: %q, want %q", c.md, got, c.want)
			}
		}
	}
}
