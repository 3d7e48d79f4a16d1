package kafkagray_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Admitting a gray record allocates its routing state, which is the
// context the handler gets too, and nothing per header value: "true" and
// "false" are not copied.
func TestContext_GrayRecordAllocations(t *testing.T) {
	l := newLink(t, newLB(t))
	ctx := context.Background()
	for _, v := range []string{"true", "false"} {
		r := record("gray", v)
		allocs := testing.AllocsPerRun(100, func() { _ = l.Context(ctx, r) })
		if allocs > 1 {
			t.Errorf("Context of a record with gray: %s: %.1f allocations, want at most 1 (its state, which is its context)", v, allocs)
		}
	}
}

// Stamping a gray request's record into headers with room allocates the
// gray value's copy alone: a record's bytes are its own (a program may
// reuse them), so "true" is not shared between records.
func TestStamp_GrayRequestCopiesItsValue(t *testing.T) {
	l := newLink(t, newLB(t))
	ctx := l.Context(context.Background(), record("gray", "true"))
	a, b := record(), record()
	a.Headers = make([]kgo.RecordHeader, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		a.Headers = a.Headers[:0]
		l.Stamp(ctx, a)
	})
	if allocs > 1 {
		t.Errorf("Stamp with gray: true: %.1f allocations, want at most 1 (the value's copy)", allocs)
	}
	l.Stamp(ctx, b)
	a.Headers[0].Value = append(a.Headers[0].Value[:0], 'X') // a program reusing a record's bytes
	if got := string(b.Headers[0].Value); got != "true" {
		t.Fatalf("another record's gray value became %q when one record's bytes were reused", got)
	}
}
