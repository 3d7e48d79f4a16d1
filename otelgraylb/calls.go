package otelgraylb

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricCallDuration is the duration of each call the adapters made to an
// instance, in seconds, by service, kind and outcome (CallObserver): the
// HTTP Transport's requests (each try of a retried one) and the gRPC
// balancer's RPCs. With the OpenTelemetry Prometheus exporter it is the
// histogram graylb_client_call_duration_seconds (_bucket, _count, _sum)
// with the labels graylb_service, graylb_kind and graylb_call_outcome,
// which graylb rollout reads.
const MetricCallDuration = "graylb.client.call.duration"

// AttrCallOutcome is a call's outcome: "ok", or "error" for a failure that
// counts against the instance (a connection failure, a 5xx answer, gRPC
// Unavailable: the adapter's rule).
const AttrCallOutcome = attribute.Key("graylb.call.outcome")

// CallBuckets are the histogram's bucket boundaries, in seconds: those
// OpenTelemetry's semantic conventions advise for HTTP and RPC durations.
var CallBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// CallObserver returns a graylb.CallObserver that records each call in
// the MetricCallDuration histogram of meter, with the service, the kind of
// the instances that served it and the outcome as attributes. Pass it to
// graylb.WithCallObserver. Like Observer it allocates nothing per call
// once a service has been seen: the attribute sets of each (kind, outcome)
// are built once per service.
func CallObserver(meter metric.Meter) (graylb.CallObserver, error) {
	if meter == nil {
		return nil, fmt.Errorf("otelgraylb: nil meter")
	}
	h, err := meter.Float64Histogram(MetricCallDuration,
		metric.WithDescription("Duration of the calls made to instances, by service, kind and outcome."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(CallBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	c := &calls{hist: h}
	c.services.Store(&map[string]*callOptions{})
	return c.record, nil
}

// callOptions are the record options of one service, by kind and outcome
// (0 ok, 1 error), built once.
type callOptions [kinds][2][]metric.RecordOption

type calls struct {
	hist     metric.Float64Histogram
	mu       sync.Mutex // serialises adding a service
	services atomic.Pointer[map[string]*callOptions]
}

func (c *calls) record(service string, _ graylb.Instance, kind graylb.Kind, ok bool, d time.Duration) {
	out := 0
	if !ok {
		out = 1
	}
	secs := d.Seconds()
	if int(kind) >= kinds {
		c.hist.Record(context.Background(), secs, metric.WithAttributes(
			AttrService.String(service), AttrKind.String(kind.String()), AttrCallOutcome.String(outcomeName(out))))
		return
	}
	o := (*c.services.Load())[service]
	if o == nil {
		o = c.add(service)
	}
	c.hist.Record(context.Background(), secs, o[kind][out]...)
}

func outcomeName(i int) string {
	if i == 0 {
		return "ok"
	}
	return "error"
}

func (c *calls) add(service string) *callOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.services.Load()
	if o := old[service]; o != nil {
		return o
	}
	o := new(callOptions)
	for k := 0; k < kinds; k++ {
		for out := 0; out < 2; out++ {
			set := attribute.NewSet(AttrService.String(service),
				AttrKind.String(graylb.Kind(k).String()), AttrCallOutcome.String(outcomeName(out)))
			o[k][out] = []metric.RecordOption{metric.WithAttributeSet(set)}
		}
	}
	m := make(map[string]*callOptions, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[service] = o
	c.services.Store(&m)
	return o
}
