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

// recordPoints returns the record-duration histogram's points by attributes.
func recordPoints(t *testing.T, rm metricdata.ResourceMetrics) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelgraylb.MetricRecordDuration {
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

func TestRecordObserver(t *testing.T) {
	reader, mp := newMeter(t)
	rec, err := otelgraylb.RecordObserver(mp.Meter(otelgraylb.ScopeName))
	require.NoError(t, err)
	rec.ObserveRecord("orders", "billing", graylb.Gray, graylb.Gray, true, 20*time.Millisecond)
	rec.ObserveRecord("orders", "billing", graylb.Gray, graylb.Prod, true, time.Millisecond) // a gray partition handed to prod
	rec.ObserveRecord("orders", "billing", graylb.Prod, graylb.Prod, false, 2*time.Second)
	rec.ObserveRecord("orders", "billing", graylb.Prod, graylb.Prod, false, time.Second)
	rec.ObserveRecord("orders", "", graylb.Prod, graylb.Prod, true, 0)             // no group named: no group attribute
	rec.ObserveRecord("payments", "billing", graylb.Kind(7), graylb.Prod, true, 0) // a kind out of range is recorded under its String (prod)
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := recordPoints(t, rm)
	require.Len(t, got, 5, "%v", got)
	gg := got["graylb.consumer.kind=gray,graylb.group=billing,graylb.kind=gray,graylb.record.outcome=ok,graylb.topic=orders"]
	require.Equal(t, uint64(1), gg.Count)
	require.InDelta(t, 0.02, gg.Sum, 1e-9)
	require.Equal(t, otelgraylb.CallBuckets, gg.Bounds)
	require.Equal(t, uint64(1), got["graylb.consumer.kind=prod,graylb.group=billing,graylb.kind=gray,graylb.record.outcome=ok,graylb.topic=orders"].Count)
	failed := got["graylb.consumer.kind=prod,graylb.group=billing,graylb.kind=prod,graylb.record.outcome=failed,graylb.topic=orders"]
	require.Equal(t, uint64(2), failed.Count)
	require.InDelta(t, 3, failed.Sum, 1e-9)
	require.Equal(t, uint64(1), got["graylb.consumer.kind=prod,graylb.kind=prod,graylb.record.outcome=ok,graylb.topic=orders"].Count)
	require.Contains(t, got, "graylb.consumer.kind=prod,graylb.group=billing,graylb.kind=prod,graylb.record.outcome=ok,graylb.topic=payments")
}

func TestRecordObserverNilMeter(t *testing.T) {
	_, err := otelgraylb.RecordObserver(nil)
	require.Error(t, err)
}

func TestRecordObserverAllocations(t *testing.T) {
	_, mp := newMeter(t)
	rec, err := otelgraylb.RecordObserver(mp.Meter(otelgraylb.ScopeName))
	require.NoError(t, err)
	rec.ObserveRecord("orders", "billing", graylb.Prod, graylb.Prod, true, time.Millisecond) // the topic's sets are built once
	allocs := testing.AllocsPerRun(100, func() {
		rec.ObserveRecord("orders", "billing", graylb.Prod, graylb.Prod, true, time.Millisecond)
	})
	require.Zero(t, allocs, "allocations per recorded record")
}
