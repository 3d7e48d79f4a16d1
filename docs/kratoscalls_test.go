package docs

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/selector"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/policy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// A Kratos service's calls reach graylb_client_call_duration_seconds, the
// histogram graylb rollout judges, under every policy: 10 calls, 10
// counted, of the kind that served them.
func TestKratosCallsInMetrics(t *testing.T) {
	klog.SetLogger(klog.NewStdLogger(io.Discard))
	reg := graylb.NewRegistry()
	kratosUser(t, reg, false)
	kratosUser(t, reg, true)
	for name, policy := range map[string]policy.Policy{
		"round robin": policy.RoundRobin(), "weighted": policy.WeightedRoundRobin(),
		"random": policy.Random(), "p2c": policy.P2C(),
	} {
		t.Run(name, func(t *testing.T) {
			registry := prometheus.NewRegistry()
			exp, err := otelprom.New(otelprom.WithRegisterer(registry))
			if err != nil {
				t.Fatal(err)
			}
			provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
			defer provider.Shutdown(context.Background())
			calls, err := otelgraylb.CallObserver(provider.Meter(otelgraylb.ScopeName))
			if err != nil {
				t.Fatal(err)
			}
			lb, err := graylb.New(reg, graylb.WithPolicy(policy), graylb.WithCallObserver(calls))
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			selector.SetGlobalSelector(graylbkratos.NewBuilder(lb))
			client, err := khttp.NewClient(context.Background(), khttp.WithEndpoint("discovery:///user.http"),
				khttp.WithDiscovery(graylbkratos.NewDiscovery(reg)), khttp.WithSubset(0), khttp.WithMiddleware(graylbkratos.Client(lb)))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			// The client resolves in the background: the first call that
			// reaches a node is the first of the 10 (a call with no node
			// yet is no call to an instance, and is not told).
			var kind string
			if !poll(10*time.Second, 20*time.Millisecond, func() bool {
				kind, err = who(context.Background(), client)
				return err == nil && kind == "prod"
			}) {
				t.Fatalf("user.http not reached within 10s: %q %v", kind, err)
			}
			for i := 1; i < 10; i++ {
				kind, err := who(context.Background(), client)
				if err != nil || kind != "prod" {
					t.Fatalf("call %d: %q %v, want prod", i, kind, err)
				}
			}
			srv := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
			defer srv.Close()
			page := get(t, srv.Client(), srv.URL)
			want := `graylb_client_call_duration_seconds_count{graylb_call_outcome="ok",graylb_kind="prod",graylb_service="user.http"`
			line := ""
			for _, l := range strings.Split(page, "\n") {
				if strings.HasPrefix(l, want) {
					line = l
				}
			}
			if !strings.HasSuffix(line, " 10") {
				t.Errorf("want 10 calls counted in %s..., got %q in:\n%s", want, line, page)
			}
		})
	}
}
