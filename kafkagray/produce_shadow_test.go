package kafkagray

import (
	"context"
	"errors"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/shadow"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A shadow copy produces no record: Produce and ProduceSync refuse each
// with an error wrapping shadow.ErrWrite, before any client is touched (a
// nil client here), and tell the shadow observers.
func TestProduce_ShadowCopyProducesNothing(t *testing.T) {
	blocked := 0
	lb, err := graylb.New(graylb.NewRegistry(), shadow.WithObserver(func(e shadow.Event) {
		if e.Outcome == shadow.BlockedWrite {
			blocked++
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	l, err := New(lb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := adapter.ShadowCopy(context.Background())
	var got error
	l.Produce(ctx, nil, &kgo.Record{Topic: "orders"}, func(_ *kgo.Record, err error) { got = err })
	if !errors.Is(got, shadow.ErrWrite) {
		t.Fatalf("Produce: %v", got)
	}
	res := l.ProduceSync(ctx, nil, &kgo.Record{Topic: "orders"}, &kgo.Record{Topic: "audit"})
	for _, r := range res {
		if !errors.Is(r.Err, shadow.ErrWrite) {
			t.Fatalf("ProduceSync: %v", r.Err)
		}
	}
	if blocked != 3 {
		t.Fatalf("%d blocked writes told, want 3", blocked)
	}
}
