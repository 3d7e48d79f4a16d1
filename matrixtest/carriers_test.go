package matrixtest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/kafkagray"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/baggage"
)

// svcInstances registers svc's prod and gray instances, answering
// "<name> gray=<gray header> baggage=<baggage header>".
func svcInstances(t *testing.T) *graylb.Registry {
	t.Helper()
	reg := graylb.NewRegistry()
	for _, b := range []struct {
		name string
		md   map[string]string
	}{{"prod", nil}, {"gray", map[string]string{"gray": "true"}}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, b.name+" gray="+r.Header.Get("gray")+" baggage="+r.Header.Get("baggage"))
		}))
		t.Cleanup(srv.Close)
		host, port, err := splitHostPort(srv.Listener.Addr().String())
		require.NoError(t, err)
		require.NoError(t, reg.Register(graylb.NewInstance("svc", host, port, b.md)))
	}
	return reg
}

func get(t *testing.T, client *http.Client, url string, hdr ...string) string {
	t.Helper()
	return getWith(context.Background(), t, client, url, hdr...)
}

// getWith is get with the request's context ctx (a handler's: its calls
// keep the request's kind).
func getWith(ctx context.Context, t *testing.T, client *http.Client, url string, hdr ...string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
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

// Baggage is a carrier like headers: a request whose kind came in a
// trusted caller's W3C baggage (no gray header) produces a Kafka record
// that carries the kind, and its HTTP call through a Transport with a
// plain base (no OpenTelemetry instrumentation) reaches the gray instance
// and tells the next hop, in its header and its baggage. (The record
// carried no gray header, and the plain-base call no key: baggage lived in
// otelgraylb's own context slot.)
func TestBaggage_CarriesTheKindOverEveryTransport(t *testing.T) {
	reg := svcInstances(t)
	lb, err := graylb.New(reg, otelgraylb.WithBaggage())
	require.NoError(t, err)
	defer lb.Close()
	link, err := kafkagray.New(lb)
	require.NoError(t, err)
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	var mu sync.Mutex
	var record *kgo.Record
	edge := httptest.NewServer(httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &kgo.Record{Topic: "orders"}
		link.Stamp(r.Context(), rec)
		mu.Lock()
		record = rec
		mu.Unlock()
		io.WriteString(w, getWith(r.Context(), t, client, "http://svc/"))
	})))
	defer edge.Close()

	got := get(t, http.DefaultClient, edge.URL, "Baggage", "gray=true,other=x")
	assert.True(t, strings.HasPrefix(got, "gray gray=true baggage="), got)
	b, err := baggage.Parse(strings.SplitN(got, "baggage=", 2)[1])
	require.NoError(t, err)
	assert.Equal(t, "true", b.Member("gray").Value(), "the next hop's baggage")
	mu.Lock()
	rec := record
	mu.Unlock()
	require.NotNil(t, rec)
	assert.Equal(t, "true", headerOf(rec, "gray"), "the record carries the kind")

	assert.True(t, strings.HasPrefix(get(t, http.DefaultClient, edge.URL, "Baggage", "gray=false"), "prod gray=false"))
	assert.True(t, strings.HasPrefix(get(t, http.DefaultClient, edge.URL, "Baggage", "gray=true", "gray", "false"), "prod gray=false"),
		"a header the call carries wins over its baggage")
}

func headerOf(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, name) {
			return string(h.Value)
		}
	}
	return ""
}

// Every edge strips an untrusted caller's routing members from its
// baggage, httpctx's too (it left "Baggage: gray=true,uid=alice" intact),
// from the header the handler sees and from the context's OpenTelemetry
// baggage; other members stay, and the next hop is prod.
func TestBaggage_UntrustedEdgeStripsRoutingMembers(t *testing.T) {
	reg := svcInstances(t)
	lb, err := graylb.New(reg, otelgraylb.WithBaggage())
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	edge := httptest.NewServer(httpctx.Middleware(lb, httpctx.WithTrusted(func(*http.Request) bool { return false }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "seen="+r.Header.Get("Baggage")+" ctx="+baggage.FromContext(r.Context()).String()+" next="+getWith(r.Context(), t, client, "http://svc/"))
		})))
	defer edge.Close()
	got := get(t, http.DefaultClient, edge.URL, "Baggage", "gray=true,uid=alice,other=x")
	assert.True(t, strings.HasPrefix(got, "seen=other=x ctx= next=prod gray=false"), got)
}

// Detached work keeps the request's decided kind, rules included: 200
// requests under a 50 % canary and a gray user, each handler calling svc,
// then starting work that calls svc again after the handler returned, on
// lb.Detach(ctx). (Copying the header into graylb.WithValue on
// context.Background(), as the FAQ said, changed 106 of 200: a rule's
// decision has no header.)
func TestDetach_KeepsTheDecidedKind(t *testing.T) {
	reg := svcInstances(t)
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{CanaryPercent: 50, GrayUsers: []string{"alice"}}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	type pair struct{ in, detached string }
	results := make(chan pair, 200)
	edge := httptest.NewServer(httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := strings.Fields(getWith(r.Context(), t, client, "http://svc/"))[0]
		detached := lb.Detach(r.Context())
		done := make(chan struct{})
		go func() {
			<-done // after the handler returned
			req, _ := http.NewRequestWithContext(detached, http.MethodGet, "http://svc/", nil)
			resp, err := client.Do(req)
			if err != nil {
				results <- pair{first, err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			results <- pair{first, strings.Fields(string(b))[0]}
		}()
		defer close(done)
	})))
	defer edge.Close()
	for i := 0; i < 200; i++ {
		uid := "u" + string(rune('a'+i%26))
		if i%10 == 0 {
			uid = "alice"
		}
		get(t, http.DefaultClient, edge.URL, "uid", uid)
	}
	changed, gray := 0, 0
	for i := 0; i < 200; i++ {
		p := <-results
		if p.in != p.detached {
			changed++
		}
		if p.in == "gray" {
			gray++
		}
	}
	assert.Zero(t, changed, "detached calls that changed kind")
	assert.Positive(t, gray)
	assert.Less(t, gray, 200)
}
