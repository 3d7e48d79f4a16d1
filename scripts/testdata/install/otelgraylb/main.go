// A user's program on otelgraylb: picks are counted in an OpenTelemetry
// metric.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/otelgraylb"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func main() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := otelgraylb.Observer(mp.Meter("user"))
	if err != nil {
		fail(err)
	}
	reg := graylb.NewRegistry()
	if err := reg.Register(graylb.NewInstance("cart", "10.0.0.1", 80, nil)); err != nil {
		fail(err)
	}
	lb, err := graylb.New(reg, graylb.WithObserver(obs))
	if err != nil {
		fail(err)
	}
	defer lb.Close()
	for range 3 {
		if _, err := lb.Pick(context.Background(), "cart"); err != nil {
			fail(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fail(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == otelgraylb.MetricPicks {
				for _, dp := range s.DataPoints {
					total += dp.Value
				}
			}
		}
	}
	if total != 3 {
		fail(fmt.Errorf("%s counted %d picks, want 3", otelgraylb.MetricPicks, total))
	}
	fmt.Println("otelgraylb: 3 picks counted in", otelgraylb.MetricPicks)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
