package otelgraylb_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
)

// chain is edge → A (graylb) → B (plain net/http with OpenTelemetry's
// baggage propagation only) → C (graylb) → D (prod and gray instances).
// Each hop answers with the body of the next; D with its name.
type chain struct {
	a string // A's URL
}

type chainOptions struct {
	aRules     graylb.Rules
	cRules     graylb.Rules
	aTrusted   func(*http.Request) bool
	aOtelOuter bool // A also runs OpenTelemetry's own extraction and injection around graylb
}

func listen(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func port(t *testing.T, u string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	require.NoError(t, err)
	var n int
	fmt.Sscan(p, &n)
	return n
}

// otelExtract is what OpenTelemetry's HTTP server instrumentation does
// with baggage: the request's baggage header onto the context.
func otelExtract(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.Baggage{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// otelInject is what its client instrumentation does: the context's
// baggage into the outgoing header.
type otelInject struct{ base http.RoundTripper }

func (t otelInject) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	propagation.Baggage{}.Inject(req.Context(), propagation.HeaderCarrier(out.Header))
	return t.base.RoundTrip(out)
}

func relay(client *http.Client, url string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
}

func newChain(t *testing.T, o chainOptions) *chain {
	t.Helper()
	reg := graylb.NewRegistry()
	for _, gray := range []bool{false, true} {
		name := map[bool]string{false: "d-prod", true: "d-gray"}[gray]
		u := listen(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
		require.NoError(t, reg.Register(graylb.NewInstance("svc-d", "127.0.0.1", port(t, u),
			map[string]string{"gray": fmt.Sprint(gray)})))
	}
	// C: graylb, reading headers first, then baggage.
	lbC, err := graylb.New(reg, graylb.WithContextHandler(httpctx.Handler(), otelgraylb.Handler()), graylb.WithRules(o.cRules))
	require.NoError(t, err)
	t.Cleanup(func() { lbC.Close() })
	clientC := &http.Client{Transport: httpctx.NewTransport(lbC), Timeout: 5 * time.Second}
	c := listen(t, otelgraylb.Middleware(lbC)(httpctx.Middleware(lbC)(relay(clientC, "http://svc-d/"))))

	// B: no graylb; OpenTelemetry's baggage propagation only. It drops
	// every other header.
	prop := propagation.Baggage{}
	b := listen(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c, nil)
		prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}))
	require.NoError(t, reg.Register(graylb.NewInstance("svc-b", "127.0.0.1", port(t, b), nil)))

	// A: graylb, writing the routing values into baggage.
	lbA, err := graylb.New(reg, graylb.WithContextHandler(httpctx.Handler(), otelgraylb.Handler()), graylb.WithRules(o.aRules))
	require.NoError(t, err)
	t.Cleanup(func() { lbA.Close() })
	var rt http.RoundTripper = httpctx.NewTransport(lbA, httpctx.WithBase(otelgraylb.NewTransport(lbA, nil)))
	if o.aOtelOuter {
		rt = otelInject{base: rt}
	}
	var h http.Handler = otelgraylb.Middleware(lbA, otelgraylb.WithTrusted(o.aTrusted))(
		httpctx.Middleware(lbA, httpctx.WithTrusted(o.aTrusted))(relay(&http.Client{Transport: rt}, "http://svc-b/")))
	if o.aOtelOuter {
		h = otelExtract(h)
	}
	return &chain{a: listen(t, h)}
}

func (c *chain) get(t *testing.T, header ...string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.a, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}

func TestBaggageCarriesTheGrayDecisionThroughAPlainService(t *testing.T) {
	c := newChain(t, chainOptions{aRules: graylb.Rules{GrayUsers: []string{"alice"}}})
	for i := 0; i < 4; i++ { // round robin would alternate if the decision were lost
		require.Equal(t, "d-gray", c.get(t, "gray", "true"))
		require.Equal(t, "d-prod", c.get(t))
		require.Equal(t, "d-prod", c.get(t, "gray", "false"))
		// Decided by A's rules (a gray user), not by a header: A writes it.
		require.Equal(t, "d-gray", c.get(t, "uid", "alice"))
		require.Equal(t, "d-prod", c.get(t, "uid", "bob"))
		// A trusted caller's own baggage counts where no header says otherwise.
		require.Equal(t, "d-gray", c.get(t, "baggage", "gray=true"))
		require.Equal(t, "d-prod", c.get(t, "gray", "false", "baggage", "gray=true"), "a header wins over baggage")
	}
}

func TestBaggageFromUntrustedCallerDoesNotRoute(t *testing.T) {
	untrusted := func(*http.Request) bool { return false }
	for _, outer := range []bool{false, true} {
		t.Run(fmt.Sprintf("otel-instrumentation=%v", outer), func(t *testing.T) {
			alice := graylb.Rules{GrayUsers: []string{"alice"}}
			c := newChain(t, chainOptions{aRules: alice, cRules: alice, aTrusted: untrusted, aOtelOuter: outer})
			for _, h := range [][]string{
				{"baggage", "gray=true"},
				{"Baggage", "gray=TRUE,uid=alice"},
				{"baggage", "uid=alice"},
				{"baggage", "tenant=x", "baggage", "gray=true"},
				{"BAGGAGE", "gray=true;p=1"},
				{"baggage", "gray=tr%75e"},
				{"gray", "true", "baggage", "gray=true"},
			} {
				require.Equal(t, "d-prod", c.get(t, h...), "%q", h)
			}
		})
	}
}

func TestMiddlewareStripsOnlyRoutingMembers(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	require.NoError(t, err)
	defer lb.Close()
	var got http.Header
	var ctxBaggage baggage.Baggage
	h := otelExtract(otelgraylb.Middleware(lb, otelgraylb.WithTrusted(func(*http.Request) bool { return false }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ctxBaggage = r.Header, baggage.FromContext(r.Context())
			require.Empty(t, otelgraylb.Kept(r.Context(), "gray"))
		})))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Baggage", "gray=true,tenant=acme,uid=alice,version=v2")
	h.ServeHTTP(httptest.NewRecorder(), req)
	require.Equal(t, "tenant=acme", got.Get("Baggage"))
	require.Equal(t, 1, ctxBaggage.Len())
	require.Equal(t, "acme", ctxBaggage.Member("tenant").Value())
	require.Equal(t, "gray=true,tenant=acme,uid=alice,version=v2", req.Header.Get("Baggage"), "the caller's request is not modified")
}

func TestHostileBaggageValues(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry(), graylb.WithUserHeader("uid"))
	require.NoError(t, err)
	defer lb.Close()
	cases := map[string]string{ // baggage header → the uid kept ("" none)
		"uid=alice":                              "alice",
		"uid=al%0D%0Aice":                        "",
		"uid=%00":                                "",
		"uid=a%20b":                              "",
		"uid=" + strings.Repeat("a", 257):        "",
		"uid=" + strings.Repeat("a", 256):        strings.Repeat("a", 256),
		"uid=%ff%fe":                             "",
		"uid=%zz":                                "",
		"uid=x,uid=y":                            "y",
		"uid":                                    "",
		"=alice":                                 "",
		manyMembers(200) + "uid=alice":           "", // over the member limit: the header is dropped
		"uid=alice," + strings.Repeat("x", 9000): "",
	}
	for header, want := range cases {
		var kept string
		h := otelgraylb.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			kept = otelgraylb.Kept(r.Context(), "uid")
		}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Baggage", header)
		h.ServeHTTP(httptest.NewRecorder(), req)
		require.Equal(t, want, kept, "%.60q", header)
		require.True(t, kept == "" || otelgraylb.ValidValue(kept))
	}
}

func TestTransportWritesBaggage(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry(), graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.NoError(t, err)
	defer lb.Close()
	var sent http.Header
	rt := otelgraylb.NewTransport(lb, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r.Header
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}))
	send := func(ctx context.Context, header ...string) baggage.Baggage {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		before := req.Header.Clone()
		_, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, before, req.Header, "the caller's request is not modified")
		b, err := baggage.Parse(sent.Get("Baggage"))
		require.NoError(t, err)
		return b
	}
	b := send(context.Background(), "gray", "true", "version", "v2", "baggage", "tenant=acme")
	require.Equal(t, "true", b.Member("gray").Value())
	require.Equal(t, "v2", b.Member("version").Value())
	require.Equal(t, "acme", b.Member("tenant").Value())

	// Nothing to write: the request goes as it is.
	require.Zero(t, send(context.Background()).Len())
	// A value the program set on the context decides the kind: written.
	require.Equal(t, "true", send(graylb.WithValue(context.Background(), "gray", "true")).Member("gray").Value())
	// A header value that could not travel is not written.
	require.Zero(t, send(context.Background(), "uid", "a b").Len())
}

func manyMembers(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "k%d=v,", i)
	}
	return b.String()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func FuzzBaggageHeader(f *testing.F) {
	f.Add("gray=true,uid=alice", true)
	f.Add("uid=%0d%0a", true)
	f.Add("gray=true;p", false)
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string, trusted bool) {
		h := otelgraylb.Middleware(lb, otelgraylb.WithTrusted(func(*http.Request) bool { return trusted }))(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, k := range lb.Keys().Names() {
					v := otelgraylb.Kept(r.Context(), k)
					if v != "" && (!trusted || !otelgraylb.ValidValue(v)) {
						t.Fatalf("kept %q=%q (trusted %v)", k, v, trusted)
					}
				}
				if !trusted {
					b, _ := baggage.Parse(r.Header.Get("Baggage"))
					for _, k := range lb.Keys().Names() {
						if b.Member(k).Key() != "" {
							t.Fatalf("untrusted %q kept in the header", k)
						}
					}
				}
			}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header["Baggage"] = []string{header}
		h.ServeHTTP(httptest.NewRecorder(), req)
	})
}
