package otelgraylb_test

import (
	"context"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// histograms returns the call-duration histogram's points by attributes.
func histograms(t *testing.T, rm metricdata.ResourceMetrics) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelgraylb.MetricCallDuration {
				continue
			}
			require.Equal(t, "s", m.Unit)
			h, ok := m.Data.(metricdata.Histogram[float64])
			require.True(t, ok, "%T", m.Data)
			for _, dp := range h.DataPoints {
				out[attrString(dp.Attributes)] = dp
			}
		}
	}
	return out
}

var inst = graylb.NewInstance("svc", "10.0.0.1", 80, nil)

func TestCallObserver(t *testing.T) {
	reader, mp := newMeter(t)
	rec, err := otelgraylb.CallObserver(mp.Meter(otelgraylb.ScopeName))
	require.NoError(t, err)
	rec("svc", inst, graylb.Gray, true, 20*time.Millisecond)
	rec("svc", inst, graylb.Gray, false, 2*time.Second)
	rec("svc", inst, graylb.Prod, true, time.Millisecond)
	rec("svc", inst, graylb.Prod, true, 3*time.Millisecond)
	rec("other", inst, graylb.Kind(7), false, 0) // a kind out of range is recorded under its String
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := histograms(t, rm)
	require.Len(t, got, 4)
	ok := got["graylb.call.outcome=ok,graylb.kind=gray,graylb.service=svc"]
	require.Equal(t, uint64(1), ok.Count)
	require.InDelta(t, 0.02, ok.Sum, 1e-9)
	require.Equal(t, otelgraylb.CallBuckets, ok.Bounds)
	require.Equal(t, uint64(1), got["graylb.call.outcome=error,graylb.kind=gray,graylb.service=svc"].Count)
	require.Equal(t, uint64(2), got["graylb.call.outcome=ok,graylb.kind=prod,graylb.service=svc"].Count)
	require.Equal(t, uint64(1), got["graylb.call.outcome=error,graylb.kind=prod,graylb.service=other"].Count)
}

func TestCallObserverNilMeter(t *testing.T) {
	_, err := otelgraylb.CallObserver(nil)
	require.Error(t, err)
}

func TestCallObserverAllocations(t *testing.T) {
	_, mp := newMeter(t)
	rec, err := otelgraylb.CallObserver(mp.Meter(otelgraylb.ScopeName))
	require.NoError(t, err)
	rec("svc", inst, graylb.Gray, true, time.Millisecond) // the service's sets are built once
	allocs := testing.AllocsPerRun(100, func() { rec("svc", inst, graylb.Gray, true, time.Millisecond) })
	require.Zero(t, allocs, "allocations per recorded call")
}
