package kafkagray_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What the Link adds per record, beside what franz-go does anyway: on the
// producer, Stamp and the partitioner against franz-go's default
// partitioner (sticky, murmur2 for keys); on the consumer, admitting the
// record against nothing. A prod record produced outside a request, with
// a key; a gray record from a gray request.
func BenchmarkProduce(b *testing.B) {
	lb := newLB(b)
	link := newLink(b, lb)
	gray := link.Context(context.Background(), record("gray", "true"))
	for _, c := range []struct {
		name string
		ctx  context.Context
		part kgo.Partitioner
		tag  bool
	}{
		{"plain-franz-go", context.Background(), kgo.StickyKeyPartitioner(nil), false},
		{"graylb-prod", context.Background(), link.Partitioner(), true},
		{"graylb-gray", gray, link.Partitioner(), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			tp := c.part.ForTopic("t")
			r := &kgo.Record{Topic: "t", Key: []byte("order-42"), Value: []byte("v"), Headers: make([]kgo.RecordHeader, 0, 4)}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r.Headers = r.Headers[:0]
				if c.tag {
					link.Stamp(c.ctx, r)
				}
				_ = tp.Partition(r, 8)
			}
		})
	}
}

func BenchmarkConsume(b *testing.B) {
	link := newLink(b, newLB(b))
	for _, c := range []struct {
		name  string
		rec   *kgo.Record
		admit bool
	}{
		{"plain-franz-go", record(), false},
		{"graylb-prod", record(), true},
		{"graylb-gray", record("gray", "true"), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				hctx := ctx
				if c.admit {
					hctx = link.Context(ctx, c.rec)
				}
				_ = hctx
			}
		})
	}
}

// What HandleErr adds per prod record handled: counting it, and with an
// observer two clock reads and the observer's call.
func BenchmarkHandleErr(b *testing.B) {
	rs := make([]*kgo.Record, 64)
	for i := range rs {
		rs[i] = record()
	}
	fs := fetches(rs...)
	fn := func(context.Context, *kgo.Record) error { return nil }
	for _, c := range []struct {
		name string
		obs  bool
	}{{"no-observer", false}, {"observer", true}} {
		b.Run(c.name, func(b *testing.B) {
			var l = newLink(b, newLB(b))
			if c.obs {
				l = newLink(b, newLB(b), kafkagray.WithRecordObserver(nopObserver{}))
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = l.HandleErr(context.Background(), fs, fn)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/record")
		})
	}
}
