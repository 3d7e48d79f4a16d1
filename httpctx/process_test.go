package httpctx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// grayOrProd registers svc's prod and gray instance (echo: "<name>
// gray=<gray header>") and returns the registry.
func grayOrProd(t *testing.T) *graylb.Registry {
	t.Helper()
	reg := graylb.NewRegistry()
	for _, b := range []struct {
		name string
		md   map[string]string
	}{{"prod", nil}, {"gray", map[string]string{"gray": "true"}}} {
		srv := echo(b.name)
		t.Cleanup(srv.Close)
		register(t, reg, "svc", srv, b.md)
	}
	return reg
}

// One trust boundary per process: an edge whose LoadBalancer is keyed
// gray-tag forwards whole requests (httputil.ReverseProxy copies the
// caller's headers) through a Transport whose LoadBalancer is keyed gray.
// An untrusted caller's "gray: true" is not a key the edge reads, so it
// stayed in the request and routed there: 70 of 70 reached gray. The
// inner Transport now deletes its own routing keys from an untrusted
// request before it routes, and settles the side (gray: false).
func TestTrustBoundary_ForwardingGatewayWithTwoKeySets(t *testing.T) {
	reg := grayOrProd(t)
	edge, err := graylb.New(reg, graylb.WithGrayHeader("gray-tag"))
	require.NoError(t, err)
	defer edge.Close()
	inner, err := graylb.New(reg)
	require.NoError(t, err)
	defer inner.Close()
	proxy := &httputil.ReverseProxy{
		Director:  func(r *http.Request) { r.URL.Scheme, r.URL.Host = "http", "svc" },
		Transport: NewTransport(inner),
	}
	gw := httptest.NewServer(Middleware(edge, WithTrusted(func(*http.Request) bool { return false }))(proxy))
	defer gw.Close()
	reached := 0
	for range 70 {
		got, status := fetch(t, gw.URL, "gray", "true", "uid", "alice", "Gray-Tag", "true")
		require.Equal(t, http.StatusOK, status, got)
		if strings.HasPrefix(got, "gray ") {
			reached++
		}
		assert.Equal(t, "prod gray=false version=", got, "the side is settled at the boundary")
	}
	assert.Zero(t, reached, "untrusted requests that reached the gray instance")
}

// Two LoadBalancers whose key names differ agree on what crosses: a
// request admitted at an edge keyed gray-tag as gray is gray to a
// LoadBalancer keyed gray in the same process, and the next hop is told so
// under its key. (It was prod on every later hop.)
func TestKeySets_AgreeOnTheKind(t *testing.T) {
	reg := grayOrProd(t)
	edge, err := graylb.New(reg, graylb.WithGrayHeader("gray-tag"))
	require.NoError(t, err)
	defer edge.Close()
	inner, err := graylb.New(reg)
	require.NoError(t, err)
	defer inner.Close()
	client := &http.Client{Transport: NewTransport(inner)}
	srv := httptest.NewServer(Middleware(edge)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://svc/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})))
	defer srv.Close()
	for range 10 {
		got, _ := fetch(t, srv.URL, "Gray-Tag", "TRUE")
		assert.Equal(t, "gray gray=true version=", got, "gray-tag: TRUE admitted at the edge")
		got, _ = fetch(t, srv.URL, "Gray-Tag", "false")
		assert.Equal(t, "prod gray=false version=", got)
		got, _ = fetch(t, srv.URL)
		assert.Equal(t, "prod gray= version=", got, "nobody classified it")
	}
}
