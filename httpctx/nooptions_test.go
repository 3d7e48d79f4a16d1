package httpctx

import (
	"io"
	"net/http"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A LoadBalancer built with no option at all (no ContextHandler): the
// Transport and the Middleware read their own transport's keys, the HTTP
// headers of the outgoing request and of the incoming one, so a gray
// header routes gray as the README's snippets put together promise.
func noOptionsService(t *testing.T) (*graylb.Registry, *graylb.LoadBalancer) {
	t.Helper()
	reg := graylb.NewRegistry()
	prod, gray := echoKind("prod", "gray"), echoKind("gray", "gray")
	t.Cleanup(prod.Close)
	t.Cleanup(gray.Close)
	register(t, reg, "svc", prod, nil)
	register(t, reg, "svc", gray, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return reg, lb
}

func TestNoOptions_TransportReadsTheOutgoingHeader(t *testing.T) {
	_, lb := noOptionsService(t)
	client := &http.Client{Transport: NewTransport(lb)}
	get := func(hdr ...string) string {
		req, _ := http.NewRequest(http.MethodGet, "http://svc/", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	for i := 0; i < 4; i++ {
		assert.Equal(t, "gray gray=true", get("gray", "true"), "gray: true")
		assert.Equal(t, "gray gray=true", get("gray", "TRUE"), "gray: TRUE travels as the canonical true")
		assert.Equal(t, "prod gray=false", get("gray", "false"))
		assert.Equal(t, "prod gray=", get())
	}
	// The user key is read too: a gray user's uid header.
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	for i := 0; i < 4; i++ {
		assert.Equal(t, "gray gray=true", get("uid", "alice"), "a gray user's uid header")
		assert.Equal(t, "prod gray=", get("uid", "bob"))
	}
}

func TestNoOptions_MiddlewareKeepsTheIncomingHeaderForTheTransport(t *testing.T) {
	_, lb := noOptionsService(t)
	srv := edge(t, lb, "svc")
	for i := 0; i < 4; i++ {
		got, _ := fetch(t, srv.URL, "gray", "true")
		assert.Equal(t, "gray gray=true", got, "the incoming gray header reaches the next hop's pick")
		got, _ = fetch(t, srv.URL)
		assert.Equal(t, "prod gray=", got)
	}
}

func TestNoOptions_TrustBoundaryStillStrips(t *testing.T) {
	_, lb := noOptionsService(t)
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	srv := edge(t, lb, "svc", WithTrusted(func(r *http.Request) bool { return r.Header.Get("x-internal") == "yes" }))
	for i := 0; i < 4; i++ {
		for _, forged := range [][2]string{{"gray", "true"}, {"GRAY", "true"}, {"uid", "alice"}} {
			got := rawGet(t, srv.URL, [][2]string{forged})
			assert.Equal(t, "prod gray=false", got, "untrusted %v", forged)
		}
		got := rawGet(t, srv.URL, [][2]string{{"gray", "true"}, {"x-internal", "yes"}})
		assert.Equal(t, "gray gray=true", got, "a trusted caller's gray header")
	}
}

// TestNoOptions_RetryKeepsTheCallsVersion: a retry after a refused
// connection reads the call's headers as the first route did, so the
// version filter keeps a gray request that falls back to prod on its
// version, with no ContextHandler registered.
func TestNoOptions_RetryKeepsTheCallsVersion(t *testing.T) {
	reg := graylb.NewRegistry()
	v1, v2 := named("v1"), named("v2")
	t.Cleanup(v1.Close)
	t.Cleanup(v2.Close)
	register(t, reg, "svc", v1, map[string]string{"version": "v1"})
	register(t, reg, "svc", v2, map[string]string{"version": "v2"})
	host, port := deadAddr(t) // the only gray instance, killed
	require.NoError(t, reg.Register(graylb.NewInstance("svc", host, port, map[string]string{"version": "v2", "gray": "true"})))
	lb, err := graylb.New(reg, graylb.WithFilters(filter.Version()))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	client := &http.Client{Transport: NewTransport(lb)}
	for i := 0; i < 40; i++ {
		body, code := fetchWith(t, client, "http://svc/", "gray", "true", "version", "v2")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "v2", body, "request %d fell back to prod off its version", i)
	}
}

func fetchWith(t *testing.T, client *http.Client, url string, kv ...string) (string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}
