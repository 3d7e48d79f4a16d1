package grpcctx

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// chain is edge -> A -> B, each service with one prod and one gray
// instance, every LoadBalancer with the same rules. It answers
// "A-kind>B-kind".
type chain struct {
	edge testgrpc.TestServiceClient
	reg  *graylb.Registry
}

func newChain(t *testing.T, rules graylb.Rules, serverOpts ...Option) *chain {
	t.Helper()
	reg := graylb.NewRegistry()
	withRules := graylb.WithRules(rules)
	serve(t, reg, "b", &testServer{name: "B-prod"}, nil)
	serve(t, reg, "b", &testServer{name: "B-gray"}, map[string]string{"gray": "true"})
	for _, kind := range []string{"prod", "gray"} {
		lb, next := dialLB(t, reg, "b", withRules)
		md := map[string]string{"gray": "false"}
		if kind == "gray" {
			md["gray"] = "true"
		}
		serveWith(t, reg, "a", &testServer{name: "A-" + kind, next: next}, md, ServerOptions(lb, serverOpts...))
	}
	return &chain{edge: dial(t, reg, "a", withRules), reg: reg}
}

// dialLB is dial that also returns the LoadBalancer (a server's interceptors
// take its key names).
func dialLB(t testing.TB, reg *graylb.Registry, service string, opts ...graylb.Option) (*graylb.LoadBalancer, testgrpc.TestServiceClient) {
	t.Helper()
	lb, err := graylb.New(reg, append([]graylb.Option{graylb.WithContextHandler(Handler())}, opts...)...)
	require.NoError(t, err)
	conn, err := grpc.NewClient("graylb:///"+service, append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(); lb.Close() })
	return lb, testgrpc.NewTestServiceClient(conn)
}

// serveWith is serve with the server's own options.
func serveWith(t testing.TB, reg *graylb.Registry, service string, srv *testServer, md map[string]string, opts []grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	a := lis.Addr().(*net.TCPAddr)
	require.NoError(t, reg.Register(graylb.NewInstance(service, a.IP.String(), a.Port, md)))
	return lis.Addr().String()
}

func (c *chain) unary(t *testing.T, md ...string) string {
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
	defer cancel()
	r, err := c.edge.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	return r.GetServerId()
}

func (c *chain) stream(t *testing.T, md ...string) string {
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
	defer cancel()
	st, err := c.edge.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	require.NoError(t, err)
	r, err := st.Recv()
	require.NoError(t, err)
	return string(r.GetPayload().GetBody())
}

// waitAllReady calls until every chain has answered, so no call below is
// routed while a connection is still coming up.
func (c *chain) waitAllReady(t *testing.T) {
	for _, want := range []string{"A-gray>B-gray", "A-prod>B-prod"} {
		g := []string{"gray", "false"}
		if strings.HasPrefix(want, "A-gray") {
			g[1] = "true"
		}
		require.Eventually(t, func() bool { return c.unary(t, g...) == want }, 5*time.Second, time.Millisecond)
	}
}

func mixed(answer string) bool {
	a, b, _ := strings.Cut(answer, ">")
	return strings.HasSuffix(a, "gray") != strings.HasSuffix(b, "gray")
}

// A kind decided by rules at the first hop holds for the whole chain,
// unary and streaming: with a 50 % canary and no user id, no call mixes
// kinds, and both kinds are used.
func TestFullLink_CanaryDecisionTravels(t *testing.T) {
	c := newChain(t, graylb.Rules{CanaryPercent: 50})
	c.waitAllReady(t)
	mixedChains := 0
	for name, do := range map[string]func(*testing.T, ...string) string{"unary": c.unary, "stream": c.stream} {
		counts := map[string]int{}
		for i := 0; i < 500; i++ {
			counts[do(t)]++
		}
		for answer, n := range counts {
			assert.False(t, mixed(answer), "%s: %d calls answered %s", name, n, answer)
		}
		assert.Greater(t, counts["A-gray>B-gray"], 150, "%s: %v", name, counts)
		assert.Greater(t, counts["A-prod>B-prod"], 150, "%s: %v", name, counts)
		for answer, n := range counts {
			if mixed(answer) {
				mixedChains += n
			}
		}
	}
	reliabilityFragment(t, "hostile-20-grpc-full-link", fmt.Sprintf("| gRPC full link: edge -> A -> B, 50 %% canary decided at the first hop, no user id (was 190 of 400 chains mixed) | TestFullLink_CanaryDecisionTravels, TestFullLink_GrayUserAndOptOut | 500 unary + 500 streaming calls | %d mixed chains |\n", mixedChains))
}

// A gray-user rule decides at the first hop too; gray: false from the edge
// still opts out at every hop.
func TestFullLink_GrayUserAndOptOut(t *testing.T) {
	c := newChain(t, graylb.Rules{GrayUsers: []string{"alice"}, CanaryPercent: 100})
	c.waitAllReady(t)
	for i := 0; i < 20; i++ {
		assert.Equal(t, "A-gray>B-gray", c.unary(t, "uid", "alice"))
		assert.Equal(t, "A-gray>B-gray", c.stream(t, "uid", "alice"))
		assert.Equal(t, "A-prod>B-prod", c.unary(t, "gray", "false"), "gray: false opts out of the canary at every hop")
		assert.Equal(t, "A-prod>B-prod", c.stream(t, "gray", "false"))
	}
}

// A server at a trust boundary drops every routing key an untrusted peer
// sends (a forged decision, a gray user's id, a version), with a real
// grpc-go client dialing it directly; the program's own user id counts.
func TestFullLink_TrustBoundaryDropsForgedDecision(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "b", &testServer{name: "B-prod"}, nil)
	serve(t, reg, "b", &testServer{name: "B-gray"}, map[string]string{"gray": "true"})
	serve(t, reg, "b", &testServer{name: "B-prod-v2"}, map[string]string{"version": "v2"})
	lb, next := dialLB(t, reg, "b", graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}),
		graylb.WithFilters(filter.Version()))
	authenticated := func(ctx context.Context) string {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("authorization"); len(v) > 0 && v[0] == "Bearer carol-token" {
			return "alice" // carol's token names the gray user alice
		}
		return ""
	}
	addr := serveWith(t, reg, "a", &testServer{name: "A", next: next}, nil,
		ServerOptions(lb, WithTrusted(func(context.Context) bool { return false }), WithUser(authenticated)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	attacker := testgrpc.NewTestServiceClient(conn)
	call := func(md ...string) string {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
		defer cancel()
		r, err := attacker.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		require.NoError(t, err)
		return r.GetServerId()
	}
	sent, wrong := 0, 0
	for _, forged := range [][]string{
		{"gray", "true"}, {"GRAY", "true"}, {"gray", "false", "gray", "true"}, {"uid", "alice"}, {"version", "v2"},
	} {
		for i := 0; i < 6; i++ {
			got := call(forged...)
			assert.Equal(t, "A>B-prod", got, "forged %v", forged)
			sent++
			if got != "A>B-prod" {
				wrong++
			}
		}
	}
	reliabilityFragment(t, "hostile-05-trust-grpc", fmt.Sprintf("| 5. an untrusted gRPC peer (a real grpc-go client) sends gray, a gray user's uid, a version, upper case, repeated | TestFullLink_TrustBoundaryDropsForgedDecision | %d calls | %d |\n", sent, wrong))
	assert.Equal(t, "A>B-gray", call("authorization", "Bearer carol-token"), "the program's user id counts")
}

// A rules change rebuilds the balancer's pickers through the resolver, off
// the pick path: once it is accepted, prod calls stop reaching an instance
// the new rules mark gray.
func TestBalancer_RulesChangeRebuildsPickers(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod-1"}, nil)
	p2 := serve(t, reg, "svc", &testServer{name: "prod-2"}, nil)
	lb, c := dialLB(t, reg, "svc")
	for _, want := range []string{"prod-1", "prod-2"} {
		require.Eventually(t, func() bool { got, err := call(t, c, "false"); return err == nil && got == want }, 5*time.Second, time.Millisecond)
	}
	require.NoError(t, lb.SetRules(graylb.Rules{GrayAddresses: []string{p2.Addr()}}))
	// Once gray calls reach prod-2, the new picker is in place.
	require.Eventually(t, func() bool { got, _ := call(t, c, "true"); return got == "prod-2" }, 5*time.Second, time.Millisecond)
	for i := 0; i < 50; i++ {
		got, err := call(t, c, "false")
		require.NoError(t, err)
		require.Equal(t, "prod-1", got, "prod reached the instance the rules made gray")
	}
}
