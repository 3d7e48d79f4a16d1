package httpctx

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
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

// A header the program wrote under a name that is not in canonical form
// (req.Header["gray"], which net/http sends as it is and the next hop reads
// as Gray) routes as it is sent: the Transport reads it in any letter case,
// so a request it sends gray is never routed prod.
func TestTransport_NonCanonicalHeaderNames(t *testing.T) {
	reg := graylb.NewRegistry()
	prod, gray := named("prod"), named("gray")
	defer prod.Close()
	defer gray.Close()
	register(t, reg, "svc", prod, nil)
	register(t, reg, "svc", gray, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	for _, hdr := range []http.Header{{"gray": {"true"}}, {"GRAY": {"true"}}, {"uid": {"alice"}}, {"gRaY": {"TRUE"}}} {
		for i := 0; i < 4; i++ {
			req, _ := http.NewRequest(http.MethodGet, "http://svc/", nil)
			for k, v := range hdr {
				req.Header[k] = v
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, "gray", string(b), "%v", hdr)
		}
	}
}

// The keys the Transport writes (admitted ones the call lacks, the kind it
// settles) never stand beside another spelling of the same name: the next
// hop reads one value.
func TestTransport_OneSpellingOnTheWire(t *testing.T) {
	reg := graylb.NewRegistry()
	var got []http.Header
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Clone())
		io.WriteString(w, "ok")
	}))
	defer echo.Close()
	register(t, reg, "svc", echo, nil)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	send := func(ctx context.Context, hdr http.Header) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	// An admitted gray: true, and the program's own gray: false under a
	// name in lower case: the program's travels, alone.
	send(admitted(http.Header{"Gray": {"true"}, "Uid": {"u1"}}), http.Header{"gray": {"false"}})
	// An untrusted caller's side is settled: prod, written once, whatever
	// spelling the program's header used.
	send(adapter.WithUntrustedCaller(context.Background()), http.Header{"gray": {"true"}})
	require.Len(t, got, 2)
	assert.Equal(t, []string{"false"}, got[0]["Gray"])
	assert.Equal(t, []string{"u1"}, got[0]["Uid"])
	assert.Len(t, got[1]["Gray"], 1)
}
