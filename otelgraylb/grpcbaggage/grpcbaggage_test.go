package grpcbaggage_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/otelgraylb/grpcbaggage"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// server answers with its name, or with the answer of its next hop.
type server struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	next testgrpc.TestServiceClient
}

func (s *server) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.next == nil {
		return &testgrpc.SimpleResponse{ServerId: s.name}, nil
	}
	return s.next.UnaryCall(ctx, req)
}

func start(t *testing.T, srv *server, opts ...grpc.ServerOption) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
}

func dial(t *testing.T, target string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// mdCarrier is OpenTelemetry's TextMapCarrier over gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(k string) string {
	if v := metadata.MD(c).Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (c mdCarrier) Set(k, v string) { metadata.MD(c).Set(k, v) }
func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// otelOnly is a service that runs OpenTelemetry's baggage propagation and
// nothing of graylb: incoming baggage onto the context, the context's
// baggage onto outgoing calls. Every other metadata key is dropped.
func otelOnly() ([]grpc.ServerOption, []grpc.DialOption) {
	prop := propagation.Baggage{}
	srv := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = prop.Extract(context.Background(), mdCarrier(md.Copy())) // a fresh context: nothing else travels
		return h(ctx, req)
	})
	cli := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md := metadata.MD{}
		prop.Inject(ctx, mdCarrier(md))
		return invoker(metadata.NewOutgoingContext(ctx, md), method, req, reply, cc, opts...)
	})
	return []grpc.ServerOption{srv}, []grpc.DialOption{cli}
}

type chain struct{ a testgrpc.TestServiceClient }

// newChain runs edge → A (graylb) → B (OpenTelemetry only) → C (graylb) →
// D (prod and gray instances).
func newChain(t *testing.T, aRules, cRules graylb.Rules, aTrusted func(context.Context) bool) *chain {
	t.Helper()
	reg := graylb.NewRegistry()
	for _, gray := range []bool{false, true} {
		name := map[bool]string{false: "d-prod", true: "d-gray"}[gray]
		p := start(t, &server{name: name})
		require.NoError(t, reg.Register(graylb.NewInstance("svc-d", "127.0.0.1", p, map[string]string{"gray": fmt.Sprint(gray)})))
	}
	newLB := func(r graylb.Rules) *graylb.LoadBalancer {
		lb, err := graylb.New(reg, graylb.WithContextHandler(grpcctx.Handler(), otelgraylb.Handler()), graylb.WithRules(r))
		require.NoError(t, err)
		t.Cleanup(func() { lb.Close() })
		return lb
	}
	lbC := newLB(cRules)
	toD := dial(t, "graylb:///svc-d", append(grpcctx.DialOptions(lbC), grpcbaggage.DialOptions(lbC)...)...)
	pC := start(t, &server{next: toD}, append(grpcctx.ServerOptions(lbC), grpcbaggage.ServerOptions(lbC)...)...)

	srvB, cliB := otelOnly()
	toC := dial(t, fmt.Sprintf("passthrough:///127.0.0.1:%d", pC), cliB...)
	pB := start(t, &server{next: toC}, srvB...)
	require.NoError(t, reg.Register(graylb.NewInstance("svc-b", "127.0.0.1", pB, nil)))

	lbA := newLB(aRules)
	toB := dial(t, "graylb:///svc-b", append(grpcctx.DialOptions(lbA), grpcbaggage.DialOptions(lbA)...)...)
	pA := start(t, &server{next: toB}, append(
		grpcctx.ServerOptions(lbA, grpcctx.WithTrusted(aTrusted)),
		grpcbaggage.ServerOptions(lbA, grpcbaggage.WithTrusted(aTrusted))...)...)
	return &chain{a: dial(t, fmt.Sprintf("passthrough:///127.0.0.1:%d", pA))}
}

func (c *chain) call(t *testing.T, kv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	r, err := c.a.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	require.NoError(t, err)
	return r.GetServerId()
}

func TestBaggageCarriesTheGrayDecisionThroughAPlainService(t *testing.T) {
	alice := graylb.Rules{GrayUsers: []string{"alice"}}
	c := newChain(t, alice, graylb.Rules{}, nil)
	for i := 0; i < 4; i++ {
		require.Equal(t, "d-gray", c.call(t, "gray", "true"))
		require.Equal(t, "d-prod", c.call(t))
		require.Equal(t, "d-prod", c.call(t, "gray", "false"))
		require.Equal(t, "d-gray", c.call(t, "uid", "alice"), "decided by A's rules")
		require.Equal(t, "d-gray", c.call(t, "baggage", "gray=true"), "a trusted caller's baggage")
		require.Equal(t, "d-prod", c.call(t, "gray", "false", "baggage", "gray=true"), "metadata wins over baggage")
	}
}

func TestBaggageFromUntrustedCallerDoesNotRoute(t *testing.T) {
	alice := graylb.Rules{GrayUsers: []string{"alice"}}
	c := newChain(t, alice, alice, func(context.Context) bool { return false })
	for _, kv := range [][]string{
		{"baggage", "gray=true"},
		{"baggage", "uid=alice"},
		{"baggage", "tenant=x", "baggage", "gray=true,uid=alice"},
		{"baggage", "gray=tr%75e;p=1"},
		{"gray", "true", "uid", "alice", "baggage", "gray=true"},
	} {
		require.Equal(t, "d-prod", c.call(t, kv...), "%q", kv)
	}
}

func TestUntrustedKeepsOtherMembers(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	require.NoError(t, err)
	defer lb.Close()
	ic := grpcbaggage.UnaryServerInterceptor(lb, grpcbaggage.WithTrusted(func(context.Context) bool { return false }))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("baggage", "gray=true,tenant=acme", "baggage", "uid=alice"))
	b, _ := baggage.Parse("gray=true,tenant=acme")
	ctx = baggage.ContextWithBaggage(ctx, b)
	_, err = ic(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		require.Equal(t, []string{"tenant=acme"}, md.Get("baggage"))
		require.Equal(t, "tenant=acme", baggage.FromContext(ctx).String())
		require.Empty(t, otelgraylb.Kept(ctx, "gray"))
		return nil, nil
	})
	require.NoError(t, err)
}
