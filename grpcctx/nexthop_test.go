package grpcctx

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// headerServer answers with the routing keys of the call's incoming
// metadata, as the next hop sees them: "gray=[..] version=[..]".
type headerServer struct {
	testgrpc.UnimplementedTestServiceServer
}

func seenHeaders(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return "gray=[" + strings.Join(md.Get("gray"), ",") + "] version=[" + strings.Join(md.Get("version"), ",") + "]"
}

func (headerServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: seenHeaders(ctx)}, nil
}

func (headerServer) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	return stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(seenHeaders(stream.Context()))}})
}

// TestNextHop_SeesTheDecisionOnce: the next hop sees the kind (and the
// lane) a call's rules, a context value or a propagated key decided, once,
// whether the call goes through graylb's balancer or over a ClientConn
// dialled directly with the client interceptors; a key the call carries
// is neither repeated nor contradicted. Unary and streaming alike.
func TestNextHop_SeesTheDecisionOnce(t *testing.T) {
	reg := graylb.NewRegistry()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, headerServer{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	a := lis.Addr().(*net.TCPAddr)
	require.NoError(t, reg.Register(graylb.NewInstance("callee", a.IP.String(), a.Port, nil)))

	rules := graylb.Rules{
		Matches: []graylb.Match{
			{Key: "x-region", Exact: "hz", Gray: true},
			{Key: "x-lane", Prefix: "feat-", Version: "feat-42"},
		},
		GrayUsers:     []string{"alice"},
		CanaryPercent: 1,
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithRules(rules))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	// "bob" is outside the 1 % canary (the draw hashes the user id).
	require.Equal(t, graylb.Prod, adapter.For(lb).Decide(graylb.WithValue(context.Background(), "uid", "bob"), nil).Kind)

	balanced, err := grpc.NewClient("graylb:///callee", append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { balanced.Close() })
	direct, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(lb)), grpc.WithChainStreamInterceptor(StreamClientInterceptor(lb)))
	require.NoError(t, err)
	t.Cleanup(func() { direct.Close() })

	// served is ctx as a server with ServerOptions(lb) hands it to its
	// handler for a call that arrived with in.
	served := func(in ...string) context.Context {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(in...))
		return newAdmission(lb, nil).keep(ctx)
	}
	out := func(md ...string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), md...)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"gray user rule", out("uid", "alice"), "gray=[true] version=[]"},
		{"gray match rule", out("x-region", "hz"), "gray=[true] version=[]"},
		{"prod by the canary", out("uid", "bob"), "gray=[false] version=[]"},
		{"lane from a match rule", out("x-lane", "feat-1", "uid", "bob"), "gray=[false] version=[feat-42]"},
		{"lane, the call's own version", out("x-lane", "feat-1", "uid", "bob", "version", "v9"), "gray=[false] version=[v9]"},
		{"the call's own kind beats a rule", out("x-region", "hz", "gray", "false"), "gray=[false] version=[]"},
		{"the call's own gray", out("gray", "true"), "gray=[true] version=[]"},
		{"propagated gray", served("gray", "true"), "gray=[true] version=[]"},
		{"propagated prod and version", served("gray", "false", "version", "v3"), "gray=[false] version=[v3]"},
		{"propagated user, rule decides", served("uid", "alice"), "gray=[true] version=[]"},
		{"program's WithValue gray", graylb.WithValue(context.Background(), "gray", "true"), "gray=[true] version=[]"},
		{"program's WithValue prod", graylb.WithValue(out("uid", "bob"), "gray", "false"), "gray=[false] version=[]"},
	} {
		for _, cc := range []struct {
			name string
			conn *grpc.ClientConn
		}{{"balanced", balanced}, {"direct", direct}} {
			t.Run(tc.name+"/"+cc.name, func(t *testing.T) {
				c := testgrpc.NewTestServiceClient(cc.conn)
				ctx, cancel := context.WithTimeout(tc.ctx, 5*time.Second)
				defer cancel()
				for range 3 {
					r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
					require.NoError(t, err)
					assert.Equal(t, tc.want, r.GetServerId(), "unary")
					st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
					require.NoError(t, err)
					sr, err := st.Recv()
					require.NoError(t, err)
					assert.Equal(t, tc.want, string(sr.GetPayload().GetBody()), "stream")
				}
			})
		}
	}
}

// failOnceServer fails each call's first attempt with Unavailable and
// answers the second with the routing keys it saw on both.
type failOnceServer struct {
	testgrpc.UnimplementedTestServiceServer
	mu   sync.Mutex
	seen []string
}

func (s *failOnceServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, seenHeaders(ctx))
	if len(s.seen)%2 == 1 {
		return nil, status.Error(codes.Unavailable, "first attempt")
	}
	return &testgrpc.SimpleResponse{ServerId: strings.Join(s.seen[len(s.seen)-2:], " | ")}, nil
}

// TestNextHop_EveryAttemptCarriesTheDecision: a call retried by the
// service config's retryPolicy sends the decision on each attempt, once,
// through graylb's balancer and over a direct ClientConn.
func TestNextHop_EveryAttemptCarriesTheDecision(t *testing.T) {
	reg := graylb.NewRegistry()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, &failOnceServer{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	a := lis.Addr().(*net.TCPAddr)
	require.NoError(t, reg.Register(graylb.NewInstance("callee", a.IP.String(), a.Port, nil)))
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithRules(graylb.Rules{
		Matches:       []graylb.Match{{Key: "x-lane", Prefix: "feat-", Version: "feat-42"}},
		CanaryPercent: 100,
	}))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	const retry = `"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],"retryPolicy":{"maxAttempts":2,"initialBackoff":"0.01s","maxBackoff":"0.01s","backoffMultiplier":1,"retryableStatusCodes":["UNAVAILABLE"]}}]`
	balanced, err := grpc.NewClient("graylb:///callee", append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"`+Name+`":{}}],`+retry+`}`))...)
	require.NoError(t, err)
	t.Cleanup(func() { balanced.Close() })
	direct, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{`+retry+`}`), grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(lb)))
	require.NoError(t, err)
	t.Cleanup(func() { direct.Close() })
	for _, conn := range []*grpc.ClientConn{balanced, direct} {
		c := testgrpc.NewTestServiceClient(conn)
		for _, tc := range []struct {
			ctx  context.Context
			want string
		}{
			{context.Background(), "gray=[true] version=[]"},
			{metadata.AppendToOutgoingContext(context.Background(), "x-lane", "feat-1"), "gray=[false] version=[feat-42]"},
		} {
			ctx, cancel := context.WithTimeout(tc.ctx, 5*time.Second)
			r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			cancel()
			require.NoError(t, err, conn.Target())
			assert.Equal(t, tc.want+" | "+tc.want, r.GetServerId(), conn.Target())
		}
	}
}
