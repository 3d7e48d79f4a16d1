package httpctx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
	"github.com/stretchr/testify/require"
)

// echo answers its name and the gray and version headers it received.
func echo(name string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name+" gray="+r.Header.Get("gray")+" version="+r.Header.Get("version"))
	}))
}

// TestMatchRules_TrustLanesAndPropagation: an edge behind Middleware with a
// trust boundary calls svc-b through the Transport. Match keys of the rules
// in force are stripped from untrusted callers, kept for trusted ones, and
// the decided kind and lane travel to the next hop.
func TestMatchRules_TrustLanesAndPropagation(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, b := range []struct {
		name string
		md   map[string]string
	}{
		{"b-prod", nil},
		{"b-feat", map[string]string{"version": "feat-42"}},
		{"b-gray", map[string]string{"gray": "true"}},
	} {
		srv := echo(b.name)
		defer srv.Close()
		register(t, reg, "svc-b", srv, b.md)
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithFilters(filter.Version()))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	// The middleware is built before the rules: it reads the match keys per request.
	edge := httptest.NewServer(Middleware(lb, WithTrusted(func(r *http.Request) bool { return r.RemoteAddr != "" && r.Header.Get("X-Internal") == "1" }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://svc-b/", nil)
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
	rules, err := graylb.ParseRules([]byte(`{"matches":[
		{"key":"x-region","exact":"hz","gray":true},
		{"key":"x-lane","exact":"feat-42","version":"feat-42"}]}`))
	require.NoError(t, err)
	require.NoError(t, lb.SetRules(rules))

	for _, tc := range []struct {
		name string
		hdr  []string
		want string
	}{
		{"trusted region hz goes gray", []string{"X-Internal", "1", "x-region", "hz"}, "b-gray gray=true version="},
		{"trusted lane takes the lane, the version travels", []string{"X-Internal", "1", "x-lane", "feat-42"}, "b-feat gray=false version=feat-42"},
		{"trusted, gray false opts out", []string{"X-Internal", "1", "x-region", "hz", "gray", "false"}, "b-prod gray=false version="},
		{"untrusted region hz never matches", []string{"x-region", "hz"}, "b-prod gray=false version="},
		{"untrusted, other letter case", []string{"X-REGION", "hz"}, "b-prod gray=false version="},
		{"untrusted lane never matches", []string{"x-lane", "feat-42"}, "b-prod gray=false version="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 6 {
				got, code := fetch(t, edge.URL, tc.hdr...)
				require.Equal(t, http.StatusOK, code, got)
				require.Equal(t, tc.want, got)
			}
		})
	}
	// Untrusted, repeated: every copy is stripped.
	req, _ := http.NewRequest(http.MethodGet, edge.URL, nil)
	req.Header["X-Region"] = []string{"hz", "hz"}
	req.Header["x-region"] = []string{"hz"}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "b-prod gray=false version=", string(b))

	// Rules without matches: the key is an ordinary header again.
	require.NoError(t, lb.SetRules(graylb.Rules{}))
	got, _ := fetch(t, edge.URL, "X-Internal", "1", "x-region", "hz")
	require.Equal(t, "b-prod gray= version=", got)
}
