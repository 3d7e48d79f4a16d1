package kafkagray_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Gray records land on the last N partitions, prod records on the others,
// keyed or not; a topic too small for a gray partition is all prod.
func TestPartitioner_ByKind(t *testing.T) {
	l := newLink(t, newLB(t), kafkagray.WithGrayPartitions(2))
	tp := l.Partitioner().ForTopic("t")
	for i := 0; i < 200; i++ {
		var key []byte
		if i%2 == 0 {
			key = []byte(fmt.Sprint("k", i))
		}
		g := record("gray", "true")
		g.Key = key
		p := record("gray", "false")
		p.Key = key
		n := record()
		n.Key = key
		if got := tp.Partition(g, 6); got < 4 || got > 5 {
			t.Fatalf("gray record %d on partition %d of 6, want 4 or 5", i, got)
		}
		for _, r := range []*kgo.Record{p, n} {
			if got := tp.Partition(r, 6); got < 0 || got > 3 {
				t.Fatalf("prod record %d on partition %d of 6, want 0-3", i, got)
			}
		}
		if got := tp.Partition(g, 2); got < 0 || got > 1 {
			t.Fatalf("gray record on a 2-partition topic with 2 gray partitions (none kept for gray): partition %d, want 0 or 1", got)
		}
	}
}

// A key keeps its partition within its kind.
func TestPartitioner_KeyIsSticky(t *testing.T) {
	l := newLink(t, newLB(t))
	tp := l.Partitioner().ForTopic("t")
	r := record()
	r.Key = []byte("order-7")
	first := tp.Partition(r, 8)
	for i := 0; i < 10; i++ {
		if got := tp.Partition(r, 8); got != first {
			t.Fatalf("key moved from %d to %d", first, got)
		}
	}
	if !tp.RequiresConsistency(r) {
		t.Fatal("a keyed record does not require consistency")
	}
}

// Stamping and partitioning a prod record allocates nothing but its one
// header (the gray key's value written for the next hop).
func TestStampAndPartition_Allocations(t *testing.T) {
	l := newLink(t, newLB(t))
	tp := l.Partitioner().ForTopic("t")
	r := record()
	r.Headers = make([]kgo.RecordHeader, 0, 4)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		r.Headers = r.Headers[:0]
		l.Stamp(ctx, r)
		_ = tp.Partition(r, 4)
	})
	if allocs > 1 {
		t.Fatalf("Stamp+Partition of a prod record: %.1f allocations, want at most 1", allocs)
	}
}

// Records without a key spread over every partition of their kind, however
// the kinds interleave: with every third record gray, a turn shared by both
// kinds sent prod records to two of the three prod partitions only.
func TestPartitioner_RoundRobinPerKind(t *testing.T) {
	l := newLink(t, newLB(t))
	tp := l.Partitioner().ForTopic("t")
	seen := map[int]int{}
	for i := 0; i < 300; i++ {
		r := record("gray", fmt.Sprint(i%3 == 0))
		seen[tp.Partition(r, 4)]++
	}
	for p := 0; p < 4; p++ {
		if seen[p] == 0 {
			t.Fatalf("partition %d got no record (spread %v)", p, seen)
		}
	}
}

// Admitting a prod record that carries no routing key allocates nothing:
// a consumer of prod records pays no allocation per record.
func TestContext_ProdRecordAllocatesNothing(t *testing.T) {
	l := newLink(t, newLB(t))
	r := record("trace", "abc")
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() { _ = l.Context(ctx, r) })
	if allocs != 0 {
		t.Fatalf("Context of a prod record: %.1f allocations, want 0", allocs)
	}
}

// A topic that cannot hold the split (one partition: every gray record
// goes to prod) is reported as an error naming it, once.
func TestPartitioner_ReportsATopicTooSmall(t *testing.T) {
	var buf bytes.Buffer
	l := newLink(t, newLB(t), kafkagray.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	tp := l.Partitioner().ForTopic("orders")
	for range 3 {
		if got := tp.Partition(record("gray", "true"), 1); got != 0 {
			t.Fatalf("partition %d of 1", got)
		}
	}
	tp.Partition(record(), 1)
	if n := strings.Count(buf.String(), "level=ERROR"); n != 1 || !strings.Contains(buf.String(), "topic=orders") {
		t.Fatalf("want one error naming the topic, logged:\n%s", buf.String())
	}
}
