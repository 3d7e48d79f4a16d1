package otelgraylb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func newMeter(t testing.TB) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return reader, mp
}

// points returns the int64 data points of the named instrument, by their
// attributes rendered as "k=v,k=v".
func points(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var dps []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				dps = d.DataPoints
			case metricdata.Gauge[int64]:
				dps = d.DataPoints
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
			for _, dp := range dps {
				out[attrString(dp.Attributes)] = dp.Value
			}
		}
	}
	return out
}

func attrString(s attribute.Set) string {
	out := ""
	for _, kv := range s.ToSlice() {
		if out != "" {
			out += ","
		}
		out += string(kv.Key) + "=" + kv.Value.Emit()
	}
	return out
}

func registry(t testing.TB, service string, gray ...bool) *graylb.Registry {
	t.Helper()
	reg := graylb.NewRegistry()
	for i, g := range gray {
		md := map[string]string{}
		if g {
			md["gray"] = "true"
		}
		require.NoError(t, reg.Register(graylb.NewInstance(service, "127.0.0.1", 9000+i, md)))
	}
	return reg
}

var grayCtx = graylb.WithValue(context.Background(), "gray", "true")

func TestPickCounter(t *testing.T) {
	reader, mp := newMeter(t)
	obs, err := otelgraylb.Observer(mp.Meter(otelgraylb.ScopeName))
	require.NoError(t, err)
	reg := registry(t, "svc", false, true)
	require.NoError(t, reg.Register(graylb.NewInstance("prod-only", "127.0.0.1", 9100, nil)))
	lb, err := graylb.New(reg, graylb.WithObserver(obs))
	require.NoError(t, err)
	defer lb.Close()

	for i := 0; i < 3; i++ {
		_, err = lb.Pick(context.Background(), "svc")
		require.NoError(t, err)
	}
	_, err = lb.Pick(grayCtx, "svc")
	require.NoError(t, err)
	_, err = lb.Pick(grayCtx, "prod-only") // no gray instance: falls back
	require.NoError(t, err)
	require.NoError(t, lb.SetRules(graylb.Rules{Closed: true}))
	_, err = lb.Pick(grayCtx, "svc")
	require.NoError(t, err)
	_, err = lb.Pick(context.Background(), "nobody") // unknown: counted under one name for every such name
	require.Error(t, err)

	require.Equal(t, map[string]int64{
		"graylb.kind=prod,graylb.outcome=selected,graylb.service=svc":        3,
		"graylb.kind=gray,graylb.outcome=selected,graylb.service=svc":        1,
		"graylb.kind=gray,graylb.outcome=fell_back,graylb.service=prod-only": 1,
		"graylb.kind=gray,graylb.outcome=fell_back,graylb.service=svc":       1,
		"graylb.kind=prod,graylb.outcome=failed,graylb.service=<unrouted>":   1,
	}, points(t, reader, otelgraylb.MetricPicks))
}

// Failed picks of names that never had an instance are counted, in one
// series per request kind whatever the names: before, 20 of them left no
// failed series at all.
func TestPickCounterUnroutedNames(t *testing.T) {
	reader, mp := newMeter(t)
	obs, err := otelgraylb.Observer(mp.Meter(otelgraylb.ScopeName))
	require.NoError(t, err)
	lb, err := graylb.New(registry(t, "svc", false), graylb.WithObserver(obs))
	require.NoError(t, err)
	defer lb.Close()
	for i := 0; i < 20; i++ {
		ctx := context.Background()
		if i%4 == 0 {
			ctx = grayCtx
		}
		_, err := lb.Pick(ctx, fmt.Sprintf("nobody-%d", i))
		require.ErrorIs(t, err, graylb.ErrUnknownService)
	}
	require.Equal(t, map[string]int64{
		"graylb.kind=prod,graylb.outcome=failed,graylb.service=<unrouted>": 15,
		"graylb.kind=gray,graylb.outcome=failed,graylb.service=<unrouted>": 5,
	}, points(t, reader, otelgraylb.MetricPicks))
}

func TestRegisterReadsState(t *testing.T) {
	reader, mp := newMeter(t)
	meter := mp.Meter(otelgraylb.ScopeName)
	reg := registry(t, "svc", false, false, true)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	r, err := otelgraylb.Register(meter, lb, otelgraylb.WithAttributes(attribute.String("graylb.lb", "edge")))
	require.NoError(t, err)

	_, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.NoError(t, lb.SetRules(graylb.Rules{CanaryPercent: 10}))
	require.Error(t, lb.SetRules(graylb.Rules{CanaryPercent: -1}))

	require.Equal(t, map[string]int64{
		"graylb.kind=prod,graylb.lb=edge,graylb.service=svc": 2,
		"graylb.kind=gray,graylb.lb=edge,graylb.service=svc": 1,
	}, points(t, reader, otelgraylb.MetricInstances))
	require.Equal(t, map[string]int64{"graylb.lb=edge": 1}, points(t, reader, otelgraylb.MetricRuleChanges))
	require.Equal(t, map[string]int64{"graylb.lb=edge": 1}, points(t, reader, otelgraylb.MetricRulesRefused))
	updates := points(t, reader, otelgraylb.MetricCacheUpdates)
	require.Contains(t, updates, "graylb.lb=edge,graylb.result=applied")
	require.Equal(t, int64(0), updates["graylb.lb=edge,graylb.result=refused_empty"])
	require.Equal(t, int64(0), updates["graylb.lb=edge,graylb.result=held_shrink"])

	// An empty update is refused by the cache's protection and counted.
	require.NoError(t, reg.Deregister("svc", "127.0.0.1:9000"))
	require.NoError(t, reg.Deregister("svc", "127.0.0.1:9001"))
	require.NoError(t, reg.Deregister("svc", "127.0.0.1:9002"))
	require.Equal(t, int64(1), points(t, reader, otelgraylb.MetricCacheUpdates)["graylb.lb=edge,graylb.result=refused_empty"])

	require.NoError(t, r.Unregister())
	require.Empty(t, points(t, reader, otelgraylb.MetricInstances))
}

func TestNilArguments(t *testing.T) {
	_, mp := newMeter(t)
	_, err := otelgraylb.Observer(nil)
	require.Error(t, err)
	_, err = otelgraylb.Register(mp.Meter("x"), nil)
	require.Error(t, err)
}

func TestObserverAllocatesNothing(t *testing.T) {
	_, mp := newMeter(t)
	obs, err := otelgraylb.Observer(mp.Meter(otelgraylb.ScopeName))
	require.NoError(t, err)
	obs("svc", graylb.Gray, graylb.Selected) // first sight of the service builds its sets
	allocs := testing.AllocsPerRun(1000, func() { obs("svc", graylb.Gray, graylb.Selected) })
	require.Zero(t, allocs)
}

func TestRegisterCountsEjections(t *testing.T) {
	reader, mp := newMeter(t)
	reg := registry(t, "svc", false, false, true)
	lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 2}))
	require.NoError(t, err)
	defer lb.Close()
	_, err = otelgraylb.Register(mp.Meter(otelgraylb.ScopeName), lb)
	require.NoError(t, err)
	_, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.Empty(t, points(t, reader, otelgraylb.MetricEjections), "no ejection yet")
	require.Equal(t, map[string]int64{"graylb.kind=prod,graylb.service=svc": 0, "graylb.kind=gray,graylb.service=svc": 0},
		points(t, reader, otelgraylb.MetricEjected))

	bad := graylb.NewInstance("svc", "127.0.0.1", 9000, nil)
	adapter.For(lb).Report("svc", bad, false, 0)
	adapter.For(lb).Report("svc", bad, false, 0) // the second failure in a row ejects it, on this goroutine

	require.Equal(t, map[string]int64{"graylb.kind=prod,graylb.service=svc": 1}, points(t, reader, otelgraylb.MetricEjections))
	require.Equal(t, map[string]int64{"graylb.kind=prod,graylb.service=svc": 1, "graylb.kind=gray,graylb.service=svc": 0},
		points(t, reader, otelgraylb.MetricEjected))
	require.Equal(t, map[string]int64{"graylb.kind=prod,graylb.service=svc": 1, "graylb.kind=gray,graylb.service=svc": 1},
		points(t, reader, otelgraylb.MetricInstances), "an ejected instance is not routable")

	// Without outlier detection, no ejected gauge.
	reader2, mp2 := newMeter(t)
	lb2, err := graylb.New(registry(t, "svc", false))
	require.NoError(t, err)
	defer lb2.Close()
	_, err = otelgraylb.Register(mp2.Meter(otelgraylb.ScopeName), lb2)
	require.NoError(t, err)
	_, err = lb2.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.Empty(t, points(t, reader2, otelgraylb.MetricEjected))
}
