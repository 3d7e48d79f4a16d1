package kafkagray

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A record's kind decides which consumers handle it, whatever produced it.
// kafkagray's partitioner puts each record on a partition of its kind, but
// most producers of a mixed estate are not graylb's: a plain franz-go
// client or Spring Kafka partitions by key or at random, and one on an
// Untrusted topic could steer a record to a gray partition. A consumer
// that polls a record of the other kind does not handle it: it produces
// it again, through the Link's partitioner, to a partition of its kind,
// and its offset is committed only after that (Handle returns once the
// broker acknowledged). One group, offsets per partition: nothing is lost
// when consumers come and go, and a prod record is handled only by prod
// consumers.

// kindOf is the kind r is handled as: its gray header, prod on an
// Untrusted topic.
func (l *Link) kindOf(r *kgo.Record) bool { return !l.untrusted && l.recordGray(r) }

// elsewhere reports whether a record of kind gray on topic belongs to
// consumers of the other kind than this one's: a prod record always does
// on a gray consumer; a gray record on a prod consumer only while the
// group's leader gives the topic's gray partitions to gray members (a gray
// consumer is alive and the rules are open), else prod handles it.
func (l *Link) elsewhere(topic string, gray bool) bool {
	if !gray {
		return true // on a gray consumer
	}
	m := l.grayTo.Load()
	return m != nil && (*m)[topic]
}

// reroute produces rs again, each to a partition of its kind, and waits
// for the broker's acknowledgement of every one.
func (l *Link) reroute(ctx context.Context, rs []*kgo.Record) error {
	cl := l.cl.Load()
	if cl == nil {
		l.warnNoC.Do(func() {
			l.logger.Error("kafkagray: records of the other kind reached this consumer and no client was given to Follow to produce them again: handling them here")
		})
		return errors.New("kafkagray: no client to produce records of the other kind again (Link.Follow)")
	}
	out := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		c := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
		if l.untrusted { // no routing key travels: the record is prod
			h := (*headers)(c)
			for _, n := range l.b.Keys().Names() {
				h.Delete(n)
			}
		}
		out[i] = c
	}
	if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return fmt.Errorf("kafkagray: producing %d records of the other kind again: %w", len(out), err)
	}
	l.rerouted.Add(uint64(len(out)))
	return nil
}

// reportUnsplit logs, once per topic, a topic with too few partitions to
// keep a gray one: all its records are handled by prod consumers.
func (l *Link) reportUnsplit(topic string, partitions int32) {
	if _, seen := l.unsplit.LoadOrStore(topic, true); seen {
		return
	}
	l.logger.Error("kafkagray: topic has too few partitions for a gray one: all its records, gray ones too, are handled by prod consumers; create it with more partitions than WithGrayPartitions",
		"topic", topic, "partitions", partitions, "grayPartitions", l.grayParts)
}
