package adapter_test

import (
	"context"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// BenchmarkAdmitWatched is BenchmarkAdmit while a graceful stop waits for
// callers to stop (Quiet): each admission after it looked stores once.
func BenchmarkAdmitWatched(b *testing.B) {
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	defer lb.Close()
	a := adapter.For(lb).Admitter()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go adapter.For(lb).Quiet(ctx, time.Hour)
	c := mapCarrier{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.Admit(context.Background(), c, adapter.Admission{})
		}
	})
}
