package kafkagray_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The record parts of the conformance suite over kafkagray, without a
// broker: a record is produced through Link.Stamp (what Produce and
// ProduceSync call) and consumed through Link.Context (what Handle and
// HandleErr call), the suite handing the headers from one to the other.
func TestConformance(t *testing.T) {
	adaptertest.RunRecords(t, adaptertest.RecordDriver{
		Name: "kafkagray",
		Produce: func(t *testing.T, lb *graylb.LoadBalancer, ctx context.Context, headers []adaptertest.Header) []adaptertest.Header {
			r := toRecord(headers)
			newLink(t, lb).Stamp(ctx, r)
			return fromRecord(r)
		},
		Consume: func(t *testing.T, lb *graylb.LoadBalancer, untrusted bool, ctx context.Context, headers []adaptertest.Header) (context.Context, []adaptertest.Header) {
			var opts []kafkagray.Option
			if untrusted {
				opts = append(opts, kafkagray.Untrusted())
			}
			r := toRecord(headers)
			ctx = newLink(t, lb, opts...).Context(ctx, r)
			return ctx, fromRecord(r)
		},
	})
}

func toRecord(headers []adaptertest.Header) *kgo.Record {
	r := &kgo.Record{Topic: "t", Value: []byte("v")}
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	return r
}

func fromRecord(r *kgo.Record) []adaptertest.Header {
	out := make([]adaptertest.Header, 0, len(r.Headers))
	for _, h := range r.Headers {
		out = append(out, adaptertest.Header{Key: h.Key, Value: string(h.Value)})
	}
	return out
}
