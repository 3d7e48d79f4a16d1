package docs

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// docs/observability.md: metrics, and the debug page's picks.
func TestOTelMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("user-service", "10.0.0.1", 8080, nil))

	// snippet: otel-metrics
	meter := provider.Meter(otelgraylb.ScopeName)
	obs, err := otelgraylb.Observer(meter) // graylb.picks{service, kind, outcome}
	if err != nil {
		log.Fatal(err)
	}
	picks := debugpage.NewPickCounters() // the debug page's table of picks
	lb, err := graylb.New(reg, graylb.WithObserver(obs, picks.Observe))
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()
	r, err := otelgraylb.Register(meter, lb) // gauges and counters read at collection
	if err != nil {
		log.Fatal(err)
	}
	defer r.Unregister()
	debug := debugpage.Handler(lb, debugpage.WithPickCounters(picks)) // for operators only
	// end snippet

	if _, err := lb.Pick(context.Background(), "user-service"); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found[m.Name] = true
		}
	}
	for _, name := range []string{"graylb.picks", "graylb.instances", "graylb.rules.changes"} {
		if !found[name] {
			t.Errorf("no %s among %v", name, found)
		}
	}
	rec := httptest.NewRecorder()
	debug.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/graylb?format=json", nil))
	if !strings.Contains(rec.Body.String(), `"selected": 1`) {
		t.Errorf("the debug page does not count the pick:\n%s", rec.Body.String())
	}
}

// docs/observability.md: the metrics in the Prometheus text format.
func TestOTelPrometheus(t *testing.T) {
	mux := http.NewServeMux()

	// snippet: otel-prometheus
	registry := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(registry)) // go.opentelemetry.io/otel/exporters/prometheus
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	// end snippet

	defer provider.Shutdown(context.Background())
	obs, err := otelgraylb.Observer(provider.Meter(otelgraylb.ScopeName))
	if err != nil {
		t.Fatal(err)
	}
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("user-service", "10.0.0.1", 8080, nil))
	lb, err := graylb.New(reg, graylb.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if _, err := lb.Pick(context.Background(), "user-service"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	page := get(t, http.DefaultClient, srv.URL+"/metrics")
	if !strings.Contains(page, `graylb_picks_total{graylb_kind="prod",graylb_outcome="selected",graylb_service="user-service"`) {
		t.Errorf("no prod pick in:\n%s", page)
	}
}

// docs/observability.md: the gray decision in W3C baggage, over HTTP. A
// trusted caller's baggage gray=true routes gray, and travels on in the
// outgoing baggage; an untrusted caller's does not route.
func TestOTelBaggageHTTP(t *testing.T) {
	reg := graylb.NewRegistry()
	baggageOf := func(name string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name+" baggage="+r.Header.Get("Baggage"))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	registerHTTP(t, reg, "user-service", baggageOf("prod"), nil)
	registerHTTP(t, reg, "user-service", baggageOf("gray"), map[string]string{"gray": "true"})
	mux := http.NewServeMux()
	isInternal := func(r *http.Request) bool { return r.Header.Get("X-Internal") == "yes" }

	// snippet: otel-baggage-http
	lb, err := graylb.New(reg, otelgraylb.WithBaggage())
	if err != nil {
		log.Fatal(err)
	}
	// nothing else: the middleware admits the routing members of a trusted caller's
	// baggage, and the Transport writes the request's keys into the next hop's
	h := httpctx.Middleware(lb, httpctx.WithTrusted(isInternal))(mux)
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	// end snippet

	defer lb.Close()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", "http://user-service/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i := 0; i < 2; i++ {
		if got := get(t, http.DefaultClient, srv.URL, "Baggage", "gray=true", "X-Internal", "yes"); !strings.HasPrefix(got, "gray baggage=") || !strings.Contains(got, "gray=true") {
			t.Errorf("trusted baggage gray=true: %q", got)
		}
		if got := get(t, http.DefaultClient, srv.URL, "Baggage", "gray=true"); !strings.HasPrefix(got, "prod ") {
			t.Errorf("untrusted baggage gray=true: %q", got)
		}
	}
}

// Baggage over gRPC: the same option, the interceptors read and write it.
func TestOTelBaggageGRPC(t *testing.T) {
	reg := graylb.NewRegistry()
	grpcService(t, reg, "svc")
	lb, err := graylb.New(reg, otelgraylb.WithBaggage())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	p := func(ctx context.Context) bool {
		md, _ := metadata.FromIncomingContext(ctx)
		return len(md.Get("x-internal")) > 0
	}
	srv := grpc.NewServer(grpcctx.ServerOptions(lb, grpcctx.WithTrusted(p))...)
	conn, err := grpc.NewClient("graylb:///svc", append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	front := serveGRPC(t, srv, &named{name: "front", next: testgrpc.NewTestServiceClient(conn)})
	fc, err := grpc.NewClient(front, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	c := testgrpc.NewTestServiceClient(fc)
	for i := 0; i < 2; i++ {
		if got := unary(t, c, "baggage", "gray=true", "x-internal", "1"); got != "front → svc-gray" {
			t.Errorf("trusted baggage gray=true: %q", got)
		}
		if got := unary(t, c, "baggage", "gray=true"); got != "front → svc-prod" {
			t.Errorf("untrusted baggage gray=true: %q", got)
		}
	}
}
