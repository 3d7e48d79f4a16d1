package docs

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/shadow"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// docs/shadow.md: a caller that mirrors, with the shadow metrics.
func TestShadowCaller(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	meter := provider.Meter(otelgraylb.ScopeName)
	reg := graylb.NewRegistry()
	httpService(t, reg, "user-service")
	rules := graylb.Rules{ShadowPercent: 100}

	// snippet: shadow-caller
	shadows, err := otelgraylb.ShadowObserver(meter) // graylb.shadow{service, route, outcome}, graylb.shadow.differences
	if err != nil {
		log.Fatal(err)
	}
	lb, err := graylb.New(reg, graylb.WithRules(rules), shadow.WithObserver(shadows)) // the share: the rules' shadowPercent
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithMirror(
		shadow.WithIgnore("meta.traceId"), // a path never compared
		shadow.WithCopyTimeout(2*time.Second),
	))}
	// end snippet

	for range 5 {
		if got := get(t, client, "http://user-service/users/42"); got != "user-service-prod gray=" {
			t.Fatalf("a prod request answered %q", got)
		}
	}
	counted := func() int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == otelgraylb.MetricShadow {
					for _, p := range s.DataPoints {
						if o, _ := p.Attributes.Value(otelgraylb.AttrShadowOutcome); o.AsString() == "differs" {
							n += p.Value
						}
					}
				}
			}
		}
		return n
	}
	// The echo instances answer their names: every copy differs.
	if !poll(10*time.Second, 10*time.Millisecond, func() bool { return counted() == 5 }) {
		t.Fatalf("%d copies counted as differing, want 5", counted())
	}
}

// docs/shadow.md: a handler whose read writes downstream carries on when
// the write is refused for a copy; a dry-run endpoint lets a copy call it.
func TestShadowWrites(t *testing.T) {
	reg := graylb.NewRegistry()
	var views, quotes atomic.Int64
	ledger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/views":
			views.Add(1)
		case "/quotes":
			quotes.Add(1)
		}
	}))
	defer ledger.Close()
	registerHTTP(t, reg, "ledger", ledger, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	var skipped atomic.Int64

	handler := httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// snippet: shadow-write-skipped
		post, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://ledger/views", strings.NewReader(`{"order":42}`))
		resp, err := client.Do(post)
		switch {
		case errors.Is(err, shadow.ErrWrite):
			// A copy (shadow.Is(r.Context())): the view is not written, the read goes on.
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		default:
			resp.Body.Close()
		}
		// end snippet
		if err != nil {
			skipped.Add(1)
		}

		// snippet: shadow-dry-run
		ctx := r.Context()
		if shadow.Is(ctx) {
			ctx = shadow.AllowWrites(ctx) // the dry run writes nothing: the copy may call it
		}
		quote, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://ledger/quotes?dry-run=true", strings.NewReader(`{"order":42}`))
		// end snippet
		if resp, err := client.Do(quote); err == nil {
			resp.Body.Close()
		}
		io.WriteString(w, "ok")
	}))
	srv := httptest.NewServer(handler)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set(adapter.ShadowKey, "true") // a copy, as the caller's Transport sends it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || views.Load() != 0 || quotes.Load() != 1 || skipped.Load() != 1 {
		t.Fatalf("status %d, %d views written, %d quotes, %d skipped: want 200, 0, 1, 1", resp.StatusCode, views.Load(), quotes.Load(), skipped.Load())
	}
}

// docs/shadow.md: gRPC methods marked idempotent are mirrored.
func TestShadowGRPC(t *testing.T) {
	reg := graylb.NewRegistry()
	grpcService(t, reg, "user-service")
	differ := make(chan shadow.Event, 8)
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(func(e shadow.Event) {
		if e.Outcome == shadow.Differs {
			differ <- e
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()

	// snippet: shadow-grpc
	conn, err := grpc.NewClient("graylb:///user-service", append(grpcctx.DialOptions(lb,
		grpcctx.WithMirror(shadow.WithNoiseSample(0.1)),
	), grpc.WithTransportCredentials(insecure.NewCredentials()),
		// mirrored; a copy may call it
		grpc.WithDefaultCallOptions(grpcctx.Idempotent("/grpc.testing.TestService/UnaryCall")),
	)...)
	// end snippet
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := unary(t, testgrpc.NewTestServiceClient(conn)); got != "user-service-prod" {
		t.Fatalf("answered by %s", got)
	}
	select {
	case e := <-differ:
		if len(e.Paths) != 1 || e.Paths[0] != "serverId" {
			t.Fatalf("differs at %v", e.Paths)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the copy was not compared")
	}
}
