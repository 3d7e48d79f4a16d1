package gozero_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/graylb/graylb/httpctx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/rest"
	"github.com/zeromicro/go-zero/zrpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// The chains a request can take: the rest edge, then an instance of
// svc-a, then an instance of svc-b, each of the request's kind.
const (
	grayChain = "edge,a-gray,b-gray"
	prodChain = "edge,a-prod,b-prod"
)

func kindName(gray bool) string {
	if gray {
		return "gray"
	}
	return "prod"
}

// zrpcClient returns a zrpc client of service routed by lb, with go-zero's
// default client configuration (zrpc's p2c balancer, its interceptors).
func zrpcClient(t *testing.T, lb *graylb.LoadBalancer, service string) testgrpc.TestServiceClient {
	t.Helper()
	cli, err := gozero.NewClient(lb, clientConf(t, gozero.Target(service)))
	require.NoError(t, err)
	t.Cleanup(func() { cli.Conn().Close() })
	return testgrpc.NewTestServiceClient(cli.Conn())
}

// chain starts, with go-zero only, a rest edge → zrpc svc-a → zrpc svc-b
// chain over one graylb registry: a gray and a prod instance of svc-a and
// of svc-b, each process with a LoadBalancer of its own under rules (a gray
// instance's calls gray by default, as a gray deployment's are). It
// returns the edge's URL; GET /chain answers the instances the request
// went through.
func chain(t *testing.T, rules graylb.Rules, edge ...httpctx.MiddlewareOption) string {
	t.Helper()
	reg := graylb.NewRegistry()
	return chainOver(t, reg, "svc-a", "svc-b", func(service string, gray bool, host string, port int) {
		require.NoError(t, reg.Register(graylb.NewInstance(service, host, port, map[string]string{"gray": strconv.FormatBool(gray)})))
	}, rules, edge...)
}

// chainOver is chain over sup, with services a and b, each instance
// registered by register.
func chainOver(t *testing.T, sup graylb.Supplier, svcA, svcB string, register func(service string, gray bool, host string, port int), rules graylb.Rules, edge ...httpctx.MiddlewareOption) string {
	t.Helper()
	newLB := func(gray bool) *graylb.LoadBalancer {
		lb, err := graylb.New(sup, graylb.WithSelfGray(gray), graylb.WithRules(rules))
		require.NoError(t, err)
		t.Cleanup(func() { lb.Close() })
		return lb
	}
	serve := func(service string, gray bool, srv testgrpc.TestServiceServer, lb *graylb.LoadBalancer) {
		addr := zrpcServer(t, nil, service, gray, srv, func(s *zrpc.RpcServer) { gozero.AddServerInterceptors(s, lb) })
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		register(service, gray, host, p)
	}
	for _, gray := range []bool{false, true} {
		serve(svcB, gray, &named{name: "b-" + kindName(gray)}, newLB(gray))
	}
	for _, gray := range []bool{false, true} {
		lb := newLB(gray)
		b := zrpcClient(t, lb, svcB)
		serve(svcA, gray, &named{name: "a-" + kindName(gray), next: func(ctx context.Context) (string, error) {
			r, err := b.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			return r.GetServerId(), err
		}}, lb)
	}
	lb := newLB(false)
	a := zrpcClient(t, lb, svcA)
	return restServer(t, func(s *rest.Server) {
		s.Use(gozero.Middleware(lb, edge...))
		s.AddRoute(rest.Route{Method: http.MethodGet, Path: "/chain", Handler: func(w http.ResponseWriter, r *http.Request) {
			resp, err := a.UnaryCall(r.Context(), &testgrpc.SimpleRequest{})
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Write([]byte("edge," + resp.GetServerId()))
		}})
	}) + "/chain"
}

// send sends n GETs to url with hdr from 4 callers at once and counts the
// chains answered; the first error fails the test.
func send(t *testing.T, url string, n int, hdr ...string) map[string]int {
	t.Helper()
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	var (
		mu     sync.Mutex
		counts = map[string]int{}
		errs   []error
		wg     sync.WaitGroup
		next   = make(chan struct{})
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				body, err := get(client, url, hdr...)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					counts[body]++
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	require.Empty(t, errs, "failed requests")
	return counts
}

// mixed returns how many answers in counts are not one of the two whole
// chains.
func mixed(counts map[string]int) int {
	n := 0
	for c, k := range counts {
		if c != grayChain && c != prodChain {
			n += k
		}
	}
	return n
}

func TestChainCanaryNoMixedChains(t *testing.T) {
	url := chain(t, graylb.Rules{CanaryPercent: 50})
	const n = 1000
	counts := send(t, url, n)
	assert.Zero(t, mixed(counts), "every hop of a request lands on the same kind: %v", counts)
	assert.Equal(t, n, counts[grayChain]+counts[prodChain], "%v", counts)
	// 50 % of 1000: the binomial's standard deviation is about 16, so
	// 350-650 is more than 9 of them away from the mean.
	assert.InDelta(t, n/2, counts[grayChain], 150, "the canary's share of gray chains: %v", counts)
}

func TestChainProdNeverGray(t *testing.T) {
	url := chain(t, graylb.Rules{})
	for _, hdr := range [][]string{nil, {"gray", "false"}, {"gray", "yes"}, {"gray", "1"}, {"gray", "tru"}, {"gray", ""}} {
		counts := send(t, url, 100, hdr...)
		assert.Equal(t, map[string]int{prodChain: 100}, counts, "header %q", hdr)
	}
}

func TestChainGrayHeader(t *testing.T) {
	url := chain(t, graylb.Rules{})
	for _, v := range []string{"true", "TRUE", "True"} {
		counts := send(t, url, 100, "gray", v)
		assert.Equal(t, map[string]int{grayChain: 100}, counts, "gray: %s", v)
	}
}

// A request that says gray: false stays on prod under a 100 % canary,
// every hop.
func TestChainGrayFalseUnderCanary(t *testing.T) {
	url := chain(t, graylb.Rules{CanaryPercent: 100})
	assert.Equal(t, map[string]int{grayChain: 100}, send(t, url, 100), "no header under a 100 %% canary")
	assert.Equal(t, map[string]int{prodChain: 100}, send(t, url, 100, "gray", "false"), "gray: false")
	assert.Equal(t, map[string]int{prodChain: 100}, send(t, url, 100, "Gray", "FALSE"), "Gray: FALSE")
}

// At a public edge (httpctx.WithTrusted through gozero.Middleware) an
// untrusted caller's routing headers are ignored on every hop: its gray
// header, a gray user's id; a trusted caller's are honoured.
func TestChainUntrustedEdge(t *testing.T) {
	trusted := httpctx.WithTrusted(func(r *http.Request) bool { return r.Header.Get("X-Internal-Token") == "s3cret" })
	url := chain(t, graylb.Rules{GrayUsers: []string{"alice"}}, trusted)
	for _, hdr := range [][]string{{"gray", "true"}, {"GRAY", "true"}, {"uid", "alice"}, {"gray", "true", "uid", "alice"}} {
		assert.Equal(t, map[string]int{prodChain: 50}, send(t, url, 50, hdr...), "untrusted %q", hdr)
		trustedHdr := append([]string{"X-Internal-Token", "s3cret"}, hdr...)
		assert.Equal(t, map[string]int{grayChain: 50}, send(t, url, 50, trustedHdr...), "trusted %q", hdr)
	}
}

// WithUser at the edge: the user id comes from the program (here a header
// an authenticating proxy set), and a gray user's requests go gray on
// every hop even from an untrusted caller.
func TestChainEdgeUser(t *testing.T) {
	opts := []httpctx.MiddlewareOption{
		httpctx.WithTrusted(func(*http.Request) bool { return false }),
		httpctx.WithUser(func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "User ") }),
	}
	url := chain(t, graylb.Rules{GrayUsers: []string{"alice"}}, opts...)
	assert.Equal(t, map[string]int{grayChain: 50}, send(t, url, 50, "Authorization", "User alice"))
	assert.Equal(t, map[string]int{prodChain: 50}, send(t, url, 50, "Authorization", "User bob", "uid", "alice"))
}

// Header values HTTP allows and gRPC metadata does not (bytes above
// ASCII, a tab) never make the edge's zrpc call fail: they are not passed
// on as metadata. The edge still routes by them: a gray user's id it
// cannot pass on makes the request gray there, and the kind it decided
// travels (gray: true), so every hop is gray.
func TestChainHeadersGRPCCannotCarry(t *testing.T) {
	url := chain(t, graylb.Rules{GrayUsers: []string{"é"}})
	for _, hdr := range [][]string{{"uid", "é"}, {"gray", "trué"}, {"version", "v1\tv2"}, {"uid", "a\u00a0b", "gray", "true"}} {
		want := prodChain
		if len(hdr) == 4 || hdr[1] == "é" {
			want = grayChain
		}
		assert.Equal(t, map[string]int{want: 20}, send(t, url, 20, hdr...), "%q", hdr)
	}
}

// A match rule on a header of the edge's request (not one of graylb's
// keys) decides the kind once, and every hop follows it; a request that
// says gray: false opts out, an untrusted caller's header is ignored.
func TestChainMatchRule(t *testing.T) {
	rules := graylb.Rules{Matches: []graylb.Match{{Key: "x-tenant", Exact: "beta", Gray: true}}}
	trusted := httpctx.WithTrusted(func(r *http.Request) bool { return r.Header.Get("X-Internal-Token") == "s3cret" })
	url := chain(t, rules, trusted)
	in := []string{"X-Internal-Token", "s3cret"}
	assert.Equal(t, map[string]int{grayChain: 50}, send(t, url, 50, append(in, "X-Tenant", "beta")...))
	assert.Equal(t, map[string]int{prodChain: 50}, send(t, url, 50, append(in, "X-Tenant", "alpha")...))
	assert.Equal(t, map[string]int{prodChain: 50}, send(t, url, 50, append(in, "X-Tenant", "beta", "gray", "false")...))
	assert.Equal(t, map[string]int{prodChain: 50}, send(t, url, 50, "X-Tenant", "beta"), "untrusted")
}
