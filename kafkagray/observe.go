package kafkagray

import (
	"time"

	"github.com/graylb/graylb"
)

// RecordObserver is told of each record Handle and HandleErr hand to
// their function, once the function returned: the record's topic, the
// Link's consumer group (WithGroup; empty without it), the record's kind
// (its gray header as it arrived, prod on an Untrusted topic), this
// consumer's kind (WithGray), whether the function succeeded (always for
// Handle; a nil error for HandleErr) and how long it ran.
//
// It runs on the consuming goroutine, once per record: it must be fast
// and safe for concurrent use (several clients, or goroutines per
// partition, may share a Link). The otelgraylb module's RecordObserver
// satisfies it.
type RecordObserver interface {
	ObserveRecord(topic, group string, kind, consumer graylb.Kind, ok bool, d time.Duration)
}

// WithRecordObserver reports each handled record to o. Without it the Link
// still counts handled records by kind and outcome (State), with no
// clock read and no allocation per record.
func WithRecordObserver(o RecordObserver) Option { return func(l *Link) { l.obs = o } }
