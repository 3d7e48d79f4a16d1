package otelgraylb_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/shadow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Shadow events are counted by service, route and outcome, and the
// differences by what differed.
func TestShadowObserver_Counts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter(otelgraylb.ScopeName)
	obs, err := otelgraylb.ShadowObserver(meter)
	require.NoError(t, err)
	obs(shadow.Event{Service: "svc", Route: "GET /a", Outcome: shadow.Same})
	obs(shadow.Event{Service: "svc", Route: "GET /a", Outcome: shadow.Differs, Status: true, Body: true})
	obs(shadow.Event{Service: "svc", Route: "POST /b", Outcome: shadow.BlockedWrite})
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				key := m.Name
				for _, kv := range dp.Attributes.ToSlice() {
					key += " " + kv.Value.Emit()
				}
				got[key] += dp.Value
			}
		}
	}
	assert.Equal(t, map[string]int64{ // attributes sorted by key: route, service, outcome
		"graylb.shadow GET /a svc same":               1,
		"graylb.shadow GET /a svc differs":            1,
		"graylb.shadow POST /b svc blocked-write":     1,
		"graylb.shadow.differences GET /a svc status": 1,
		"graylb.shadow.differences GET /a svc body":   1,
	}, got)
	_, err = otelgraylb.ShadowObserver(nil)
	assert.Error(t, err)
}
