package httpctx

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// edge is a public gateway: Middleware with opts in front of a handler that
// calls service through the Transport and answers what it answered, with
// the gray header the call carried.
func edge(t *testing.T, lb *graylb.LoadBalancer, service string, opts ...MiddlewareOption) *httptest.Server {
	t.Helper()
	client := &http.Client{Transport: NewTransport(lb)}
	srv := httptest.NewServer(Middleware(lb, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+service+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})))
	t.Cleanup(srv.Close)
	return srv
}

// echoKind answers its name and the gray header it received.
func echoKind(name, grayHeader string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name+" "+grayHeader+"="+r.Header.Get(grayHeader))
	}))
}

// rawGet sends hdr exactly as given: names in any letter case, repeated.
func rawGet(t *testing.T, url string, hdr [][2]string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for _, kv := range hdr {
		req.Header[kv[0]] = append(req.Header[kv[0]], kv[1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// An untrusted caller cannot influence routing through any key the
// LoadBalancer reads: not the gray key, not a gray user's id, not the
// version, under custom names, in any letter case, repeated.
func TestMiddleware_TrustBoundaryDropsEveryRoutingKey(t *testing.T) {
	sent, wrong := 0, 0
	defer func() {
		reliabilityFragment(t, "hostile-04-trust-http", fmt.Sprintf("| 4. an untrusted HTTP caller sends gray, a gray user's uid, a version, under default and renamed keys, upper case, repeated | TestMiddleware_TrustBoundaryDropsEveryRoutingKey, TestMiddleware_UserFromProgram, TestMiddleware_RenamedKeysFollowEverywhere | %d requests through the gateway | %d |\n", sent, wrong))
	}()
	for _, keys := range []struct {
		opts              []graylb.Option
		gray, user, lane  string
		versionFilterOpts []filter.VersionOption
	}{
		{nil, "gray", "uid", "version", nil},
		{[]graylb.Option{graylb.WithGrayHeader("gray-tag"), graylb.WithUserHeader("x-user")}, "gray-tag", "x-user", "x-lane",
			[]filter.VersionOption{filter.WithVersionHeader("x-lane")}},
	} {
		reg := graylb.NewRegistry()
		prod, gray, v2 := echoKind("prod", keys.gray), echoKind("gray", keys.gray), echoKind("prod-v2", keys.gray)
		defer prod.Close()
		defer gray.Close()
		defer v2.Close()
		register(t, reg, "svc", prod, nil)
		register(t, reg, "svc", gray, map[string]string{"gray": "true"})
		register(t, reg, "svc", v2, map[string]string{"version": "v2"})
		lb, err := graylb.New(reg, append([]graylb.Option{graylb.WithContextHandler(Handler()),
			graylb.WithFilters(filter.Version(keys.versionFilterOpts...)),
			graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}})}, keys.opts...)...)
		require.NoError(t, err)
		defer lb.Close()
		untrusted := edge(t, lb, "svc", WithTrusted(func(*http.Request) bool { return false }))
		trusted := edge(t, lb, "svc")

		attacks := [][][2]string{
			{{keys.gray, "true"}},
			{{strings.ToUpper(keys.gray), "true"}},
			{{keys.gray, "false"}, {keys.gray, "true"}},
			{{keys.user, "alice"}},
			{{strings.ToUpper(keys.user), "alice"}},
			{{keys.lane, "v2"}},
		}
		for _, a := range attacks {
			for i := 0; i < 4; i++ {
				got := rawGet(t, untrusted.URL, a)
				assert.Equal(t, "prod "+keys.gray+"=false", got, "untrusted %v", a)
				if got != "prod "+keys.gray+"=false" {
					wrong++
				}
				sent++
			}
		}
		// The same keys from a trusted caller route as asked.
		assert.Equal(t, "gray "+keys.gray+"=true", rawGet(t, trusted.URL, [][2]string{{keys.gray, "true"}}))
		assert.Equal(t, "gray "+keys.gray+"=true", rawGet(t, trusted.URL, [][2]string{{keys.user, "alice"}}))
		assert.Equal(t, "prod-v2 "+keys.gray+"=", rawGet(t, trusted.URL, [][2]string{{keys.lane, "v2"}}))
	}
}

// At the boundary the user id comes from the program (the authenticated
// user), not from a header; it drives the gray-user rule and travels on.
func TestMiddleware_UserFromProgram(t *testing.T) {
	reg := graylb.NewRegistry()
	prod, gray := echoKind("prod", "uid"), echoKind("gray", "uid")
	defer prod.Close()
	defer gray.Close()
	register(t, reg, "svc", prod, nil)
	register(t, reg, "svc", gray, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.NoError(t, err)
	defer lb.Close()
	authenticated := func(r *http.Request) string { // a stand-in for token verification
		if r.Header.Get("Authorization") == "Bearer alice-token" {
			return "alice"
		}
		return ""
	}
	gw := edge(t, lb, "svc", WithTrusted(func(*http.Request) bool { return false }), WithUser(authenticated))
	assert.Equal(t, "gray uid=alice", rawGet(t, gw.URL, [][2]string{{"Authorization", "Bearer alice-token"}}))
	assert.Equal(t, "prod uid=", rawGet(t, gw.URL, [][2]string{{"uid", "alice"}}), "a uid header is not an identity")
	assert.Equal(t, "gray uid=alice", rawGet(t, gw.URL, [][2]string{{"Authorization", "Bearer alice-token"}, {"uid", "bob"}}))
}

// Renaming every key once, on the LoadBalancer, is enough: routing,
// propagation over two hops and the trust boundary follow.
func TestMiddleware_RenamedKeysFollowEverywhere(t *testing.T) {
	reg := graylb.NewRegistry()
	opts := []graylb.Option{
		graylb.WithGrayHeader("x-canary"), graylb.WithGrayKey("canary"), graylb.WithUserHeader("x-user"),
		graylb.WithFilters(filter.Version(filter.WithVersionHeader("x-lane"))),
	}
	b := map[string]*httptest.Server{}
	for _, name := range []string{"b-prod", "b-gray"} {
		b[name] = echoKind(name, "x-canary")
		defer b[name].Close()
	}
	register(t, reg, "b", b["b-prod"], nil)
	register(t, reg, "b", b["b-gray"], map[string]string{"canary": "true"})
	hopLB := func() *graylb.LoadBalancer {
		lb, err := graylb.New(reg, append([]graylb.Option{graylb.WithContextHandler(Handler())}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { lb.Close() })
		return lb
	}
	a := edge(t, hopLB(), "b") // service a calls b
	register(t, reg, "a", a, nil)
	gw := edge(t, hopLB(), "a", WithTrusted(func(r *http.Request) bool { return r.Header.Get("X-Internal") == "yes" }))
	assert.Equal(t, "b-gray x-canary=true", rawGet(t, gw.URL, [][2]string{{"X-Canary", "true"}, {"X-Internal", "yes"}}))
	assert.Equal(t, "b-prod x-canary=false", rawGet(t, gw.URL, [][2]string{{"X-Canary", "true"}}))
	assert.Equal(t, "b-prod x-canary=", rawGet(t, gw.URL, [][2]string{{"gray", "true"}, {"X-Internal", "yes"}}),
		"the default name means nothing once renamed")
}

// With WithUser, a handler that copies the incoming headers onto its own
// call (as a reverse proxy does) passes the program's user id, not the
// caller's: a trusted caller's uid header cannot make a request gray.
func TestMiddleware_UserFromProgramWinsOverCopiedHeader(t *testing.T) {
	reg := graylb.NewRegistry()
	prod, gray := echoKind("prod", "uid"), echoKind("gray", "uid")
	defer prod.Close()
	defer gray.Close()
	register(t, reg, "svc", prod, nil)
	register(t, reg, "svc", gray, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithRules(graylb.Rules{GrayUsers: []string{"vip"}}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	copying := httptest.NewServer(Middleware(lb, WithUser(func(*http.Request) string { return "alice" }))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://svc/", nil)
		req.Header = r.Header.Clone() // a proxy copies what came in
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})))
	defer copying.Close()
	assert.Equal(t, "prod uid=alice", rawGet(t, copying.URL, [][2]string{{"uid", "vip"}}))
	assert.Equal(t, "prod uid=alice", rawGet(t, copying.URL, [][2]string{{"UID", "vip"}, {"uid", "vip"}}))
}

// The keys the LoadBalancer's filters read are routing keys too: an
// untrusted caller's zone header does not choose the zone.
func TestMiddleware_TrustBoundaryDropsFilterKeys(t *testing.T) {
	reg := graylb.NewRegistry()
	a, b := echoKind("zone-a", "zone"), echoKind("zone-b", "zone")
	defer a.Close()
	defer b.Close()
	for srv, zone := range map[*httptest.Server]string{a: "a", b: "b"} {
		in := register(t, reg, "svc", srv, nil)
		require.NoError(t, reg.Update("svc", in.Addr(), func(i *graylb.Instance) { i.Cluster = zone }))
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithPolicy(policy.StrictRoundRobin()),
		graylb.WithFilters(filter.Partition(200, "zone", func(in graylb.Instance) string { return in.Cluster })))
	require.NoError(t, err)
	defer lb.Close()
	assert.Contains(t, lb.Keys().Names(), "zone")
	untrusted := edge(t, lb, "svc", WithTrusted(func(*http.Request) bool { return false }))
	trusted := edge(t, lb, "svc")
	seen := map[string]int{}
	for i := 0; i < 20; i++ {
		seen[rawGet(t, untrusted.URL, [][2]string{{"Zone", "b"}})]++
	}
	assert.Equal(t, 10, seen["zone-a zone="], "an untrusted zone header chooses nothing: %v", seen)
	assert.Equal(t, "zone-b zone=b", rawGet(t, trusted.URL, [][2]string{{"zone", "b"}}), "a trusted one chooses, and travels")
}
