package httpctx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
)

// A gateway (trust boundary, no match rules of its own) in front of svc-a,
// whose rules have a match on x-region. An untrusted caller's x-region
// passes the gateway (not a key the gateway's LoadBalancer reads), but the
// gateway settles the side (gray: false), so svc-a's match rule does not
// run for it.
func TestBoundary_UntrustedHeaderCannotMatchAtALaterHop(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, b := range []struct {
		name string
		md   map[string]string
	}{{"b-prod", nil}, {"b-gray", map[string]string{"gray": "true"}}} {
		srv := echo(b.name)
		defer srv.Close()
		register(t, reg, "svc-b", srv, b.md)
	}
	// svc-a: internal hop, trusts its callers (the gateway), has a match rule.
	lbA, err := graylb.New(reg, graylb.WithContextHandler(Handler()),
		graylb.WithRules(graylb.Rules{Matches: []graylb.Match{{Key: "x-region", Exact: "hz", Gray: true}}}))
	require.NoError(t, err)
	defer lbA.Close()
	ca := &http.Client{Transport: NewTransport(lbA)}
	a := httptest.NewServer(Middleware(lbA)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://svc-b/", nil)
		resp, err := ca.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		w.Write(b)
	})))
	defer a.Close()
	register(t, reg, "svc-a", a, nil)

	// Gateway: trust boundary, nobody trusted.
	lbG, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lbG.Close()
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: "svc-a"}) },
		Transport: NewTransport(lbG),
	}
	gw := httptest.NewServer(Middleware(lbG, WithTrusted(func(*http.Request) bool { return false }))(proxy))
	defer gw.Close()

	for i := 0; i < 5; i++ {
		got, _ := fetch(t, gw.URL, "gray", "true")
		require.Equal(t, "b-prod gray=false version=", got, "untrusted gray: true")
		got, _ = fetch(t, gw.URL, "x-region", "hz")
		require.Equal(t, "b-prod gray=false version=", got, "untrusted x-region: hz matched at a later hop")
	}
}

// A rules change that adds a match key while an untrusted request is being
// served: the strip ran with the old keys, the pick runs with the new ones.
func TestBoundary_RulesChangeMidRequestDoesNotLetUntrustedKeysMatch(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, b := range []struct {
		name string
		md   map[string]string
	}{{"b-prod", nil}, {"b-gray", map[string]string{"gray": "true"}}} {
		srv := echo(b.name)
		defer srv.Close()
		register(t, reg, "svc-b", srv, b.md)
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	inHandler, proceed := make(chan struct{}), make(chan struct{})
	edge := httptest.NewServer(Middleware(lb, WithTrusted(func(*http.Request) bool { return false }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inHandler <- struct{}{}
			<-proceed
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://svc-b/", nil)
			req.Header = r.Header.Clone() // as a reverse proxy copies them
			resp, err := client.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			w.Write(b)
		})))
	defer edge.Close()
	done := make(chan string)
	go func() { got, _ := fetch(t, edge.URL, "x-region", "hz"); done <- got }()
	<-inHandler
	require.NoError(t, lb.SetRules(graylb.Rules{Matches: []graylb.Match{{Key: "x-region", Exact: "hz", Gray: true}}}))
	close(proceed)
	require.Equal(t, "b-prod gray=false version=", <-done, "untrusted x-region: hz matched under rules that came mid-request")
}
