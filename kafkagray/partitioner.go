package kafkagray

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitioner returns the partitioner that keeps records of each kind on
// their partitions: a gray record (its gray header "true", see Stamp) on
// one of the topic's gray partitions (the last N, WithGrayPartitions), a
// prod record on one of the others. Within a kind a record with a key
// goes to the partition its key hashes to (FNV-1a), one without a key to
// the next partition of its kind in turn (one turn per topic and kind). A topic with no more partitions than N has
// no gray partition: every record goes to the prod partitions. Stamp the
// record (Stamp, Produce) before the client partitions it.
func (l *Link) Partitioner() kgo.Partitioner { return partitioner{l} }

type partitioner struct{ l *Link }

// ForTopic returns the topic's partitioner: the client asks once per topic.
func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{l: p.l, topic: topic}
}

// topicPartitioner partitions one topic's records. Each kind has its own
// turn: a turn shared by both kinds would skip partitions whenever the
// kinds interleave in a pattern (every third record gray: prod records
// would land on two of three prod partitions only).
type topicPartitioner struct {
	l              *Link
	topic          string
	prodRR, grayRR atomic.Uint32
}

var _ kgo.TopicPartitioner = (*topicPartitioner)(nil)

// RequiresConsistency is true for every record: Partition is then handed
// the topic's whole partition count and its answer is a partition's ID. A
// record without a key too: were it false, the client would hand over the
// number of partitions it can write to now, and an index into those (a
// gray partition among them, or missing) would not be the kind's
// partition. A keyed record keeps its partition (its order within its
// kind) even while that partition cannot be written to.
func (p *topicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

// Partition returns r's partition among n.
func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	first, count := p.l.span(p.topic, r, int32(n))
	var h uint32
	switch {
	case r.Key != nil:
		h = fnv1a(r.Key)
	case first > 0: // the gray partitions
		h = p.grayRR.Add(1)
	default:
		h = p.prodRR.Add(1)
	}
	return int(first + int32(h%uint32(count)))
}

// span returns the first partition and the number of partitions of r's
// kind in topic, of n partitions.
func (l *Link) span(topic string, r *kgo.Record, n int32) (first, count int32) {
	g := l.grayPartitions(n)
	if g > 0 && l.recordGray(r) {
		return n - g, g
	}
	if g == 0 && l.recordGray(r) {
		l.reportUnsplit(topic, n)
	}
	return 0, n - g
}

func fnv1a(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}
