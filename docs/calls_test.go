package docs

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// docs/observability.md: each call's duration and outcome, by service and
// kind, in the Prometheus names graylb rollout reads.
func TestOTelCalls(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(backend.URL, "http://"))
	p, _ := strconv.Atoi(port)
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("user-service", host, p, nil))
	registry := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		t.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer provider.Shutdown(context.Background())

	// snippet: otel-calls
	calls, err := otelgraylb.CallObserver(provider.Meter(otelgraylb.ScopeName)) // graylb.client.call.duration
	if err != nil {
		log.Fatal(err)
	}
	lb, err := graylb.New(reg, graylb.WithCallObserver(calls)) // every call of the Transport and the gRPC balancer
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	// end snippet

	resp, err := client.Get("http://user-service/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	page := get(t, http.DefaultClient, srv.URL)
	want := `graylb_client_call_duration_seconds_count{graylb_call_outcome="ok",graylb_kind="prod",graylb_service="user-service"`
	if !strings.Contains(page, want) {
		t.Errorf("no %s in:\n%s", want, page)
	}
}
