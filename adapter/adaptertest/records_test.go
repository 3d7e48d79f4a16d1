package adaptertest

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// The record suite passes against a reference message adapter written on
// package adapter alone: its producing side stamps a record's headers
// (Balancer.Stamp), its consuming side admits them (Admitter.Admit, the
// trust boundary as the consumer's).
func TestRunRecords_ReferenceAdapter(t *testing.T) {
	RunRecords(t, RecordDriver{
		Name: "reference",
		Produce: func(t *testing.T, lb *graylb.LoadBalancer, ctx context.Context, headers []Header) []Header {
			c := headerCarrier(append([]Header(nil), headers...))
			adapter.For(lb).Stamp(ctx, &c, nil)
			return c
		},
		Consume: func(t *testing.T, lb *graylb.LoadBalancer, untrusted bool, ctx context.Context, headers []Header) (context.Context, []Header) {
			c := headerCarrier(append([]Header(nil), headers...))
			ctx = adapter.For(lb).Admitter().Admit(ctx, &c, adapter.Admission{Untrusted: untrusted})
			return ctx, c
		},
	})
}
