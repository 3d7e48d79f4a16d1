package httpctx

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Key names are case-insensitive over HTTP: a match rule's key in any
// letter case matches the header in any other, on the outgoing request
// (the Transport), on the incoming one kept by Middleware, and as a
// WithValue set by the program.
func TestKeyNames_HeadersInAnyCase(t *testing.T) {
	spellings := []string{"X-Region", "x-region", "X-REGION", "x-Region"}
	reg := graylb.NewRegistry()
	prod, gray := named("prod"), named("gray")
	defer prod.Close()
	defer gray.Close()
	register(t, reg, "svc", prod, nil)
	register(t, reg, "svc", gray, map[string]string{"gray": "true"})
	for _, ruleKey := range spellings {
		lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()),
			graylb.WithRules(graylb.Rules{Matches: []graylb.Match{{Key: ruleKey, Exact: "hz", Gray: true}}}))
		require.NoError(t, err)
		client := &http.Client{Transport: NewTransport(lb)}
		get := func(ctx context.Context, hdr http.Header) string {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
			for k, v := range hdr {
				req.Header[k] = v // as the program wrote it, not canonicalised
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		edge := httptest.NewServer(Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, get(r.Context(), nil))
		})))
		for _, name := range spellings {
			assert.Equal(t, "gray", get(context.Background(), http.Header{http.CanonicalHeaderKey(name): {"hz"}}), "rule %q, outgoing header %q", ruleKey, name)
			assert.Equal(t, "gray", get(graylb.WithValue(context.Background(), name, "hz"), nil), "rule %q, WithValue %q", ruleKey, name)
			got, code := fetch(t, edge.URL, name, "hz")
			require.Equal(t, http.StatusOK, code, got)
			assert.Equal(t, "gray", got, "rule %q, incoming header %q", ruleKey, name)
		}
		edge.Close()
		lb.Close()
	}
}
