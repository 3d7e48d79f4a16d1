package otelgraylb

import (
	"context"
	"fmt"

	"github.com/graylb/graylb/shadow"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricShadow counts shadow events (package shadow) by service, route
// and outcome: mirrored copies that were the same, differed or failed,
// copies dropped by the bounds, writes refused under the shadow mark,
// noise learned. With the OpenTelemetry Prometheus exporter it is the
// counter graylb_shadow_total with the labels graylb_service,
// graylb_route and graylb_shadow_outcome, which graylb rollout's shadow
// phase reads.
const MetricShadow = "graylb.shadow"

// MetricShadowDifferences counts the copies that differed, by service,
// route and what differed (graylb_shadow_by: status, latency, body): a
// copy can differ in more than one.
const MetricShadowDifferences = "graylb.shadow.differences"

// The attributes of the shadow metrics.
const (
	AttrRoute         = attribute.Key("graylb.route")
	AttrShadowOutcome = attribute.Key("graylb.shadow.outcome")
	AttrShadowBy      = attribute.Key("graylb.shadow.by")
)

// ShadowObserver returns an observer of shadow events that counts them in
// meter's MetricShadow and MetricShadowDifferences counters. Pass it to
// shadow.WithObserver. Routes are few: a mirror bounds them.
func ShadowObserver(meter metric.Meter) (func(shadow.Event), error) {
	if meter == nil {
		return nil, fmt.Errorf("otelgraylb: nil meter")
	}
	events, err := meter.Int64Counter(MetricShadow,
		metric.WithDescription("Shadow copies by outcome, and writes refused under the shadow mark, by service and route."))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	diffs, err := meter.Int64Counter(MetricShadowDifferences,
		metric.WithDescription("Shadow copies whose answers differed from prod's, by service, route and what differed."))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	return func(e shadow.Event) {
		ctx := context.Background()
		svc, route := AttrService.String(e.Service), AttrRoute.String(e.Route)
		events.Add(ctx, 1, metric.WithAttributes(svc, route, AttrShadowOutcome.String(e.Outcome.String())))
		for by, differs := range map[string]bool{"status": e.Status, "latency": e.Latency, "body": e.Body} {
			if differs {
				diffs.Add(ctx, 1, metric.WithAttributes(svc, route, AttrShadowBy.String(by)))
			}
		}
	}, nil
}
