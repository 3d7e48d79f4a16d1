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

// MetricRecordDuration is how long each consumed record's handler ran, in
// seconds (its count: the records handled), by topic, consumer group,
// the record's kind, the consumer's kind and outcome (RecordObserver).
// With the OpenTelemetry Prometheus exporter it is the histogram
// graylb_consumer_record_duration_seconds with the labels graylb_topic,
// graylb_group, graylb_kind, graylb_consumer_kind and
// graylb_record_outcome.
const MetricRecordDuration = "graylb.consumer.record.duration"

// Attribute keys of MetricRecordDuration (beside AttrKind, the record's
// kind).
const (
	AttrTopic         = attribute.Key("graylb.topic")         // the record's topic
	AttrGroup         = attribute.Key("graylb.group")         // the consumer group; absent when the consumer named none
	AttrConsumerKind  = attribute.Key("graylb.consumer.kind") // the consuming process's kind: prod, gray
	AttrRecordOutcome = attribute.Key("graylb.record.outcome")
)

// Record outcomes (AttrRecordOutcome): the handler returned nil, or an
// error.
const (
	RecordOK     = "ok"
	RecordFailed = "failed"
)

// RecordMetrics records consumed records in the MetricRecordDuration
// histogram. Its ObserveRecord method is the record observer of the
// kafkagray module (kafkagray.WithRecordObserver takes it as it is); this
// module does not depend on that one.
type RecordMetrics struct {
	hist   metric.Float64Histogram
	mu     sync.Mutex // serialises adding a topic
	topics atomic.Pointer[map[topicGroup]*recordOptions]
}

type topicGroup struct{ topic, group string }

// recordOptions are the record options of one topic and group, by the
// record's kind, the consumer's kind and the outcome (0 ok, 1 failed),
// built once.
type recordOptions [kinds][kinds][2][]metric.RecordOption

// RecordObserver returns the RecordMetrics that records on meter. Like
// CallObserver it allocates nothing per record once a topic and group have
// been seen: their attribute sets are built once, in a copy-on-write map
// that holds the topics and groups consumed, as bounded as they are.
func RecordObserver(meter metric.Meter) (*RecordMetrics, error) {
	if meter == nil {
		return nil, fmt.Errorf("otelgraylb: nil meter")
	}
	h, err := meter.Float64Histogram(MetricRecordDuration,
		metric.WithDescription("Duration of the handlers of consumed records, by topic, group, record kind, consumer kind and outcome."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(CallBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	m := &RecordMetrics{hist: h}
	m.topics.Store(&map[topicGroup]*recordOptions{})
	return m, nil
}

// ObserveRecord records one handled record: its topic, the consumer group
// (empty: none named, and the attribute is left out), the record's kind,
// the consumer's kind, whether its handler succeeded, and how long it ran.
func (m *RecordMetrics) ObserveRecord(topic, group string, kind, consumer graylb.Kind, ok bool, d time.Duration) {
	out := 0
	if !ok {
		out = 1
	}
	secs := d.Seconds()
	if int(kind) >= kinds || int(consumer) >= kinds {
		m.hist.Record(context.Background(), secs, metric.WithAttributeSet(recordSet(topic, group, kind, consumer, out)))
		return
	}
	o := (*m.topics.Load())[topicGroup{topic, group}]
	if o == nil {
		o = m.add(topic, group)
	}
	m.hist.Record(context.Background(), secs, o[kind][consumer][out]...)
}

func recordSet(topic, group string, kind, consumer graylb.Kind, out int) attribute.Set {
	outcome := RecordOK
	if out != 0 {
		outcome = RecordFailed
	}
	kv := []attribute.KeyValue{AttrTopic.String(topic), AttrKind.String(kind.String()),
		AttrConsumerKind.String(consumer.String()), AttrRecordOutcome.String(outcome)}
	if group != "" {
		kv = append(kv, AttrGroup.String(group))
	}
	return attribute.NewSet(kv...)
}

func (m *RecordMetrics) add(topic, group string) *recordOptions {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := topicGroup{topic, group}
	old := *m.topics.Load()
	if o := old[key]; o != nil {
		return o
	}
	o := new(recordOptions)
	for k := 0; k < kinds; k++ {
		for c := 0; c < kinds; c++ {
			for out := 0; out < 2; out++ {
				o[k][c][out] = []metric.RecordOption{metric.WithAttributeSet(recordSet(topic, group, graylb.Kind(k), graylb.Kind(c), out))}
			}
		}
	}
	n := make(map[topicGroup]*recordOptions, len(old)+1)
	for k, v := range old {
		n[k] = v
	}
	n[key] = o
	m.topics.Store(&n)
	return o
}
