package adapter_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// BenchmarkAdmit is a server side's admission of one incoming call: no
// routing key, and a gray key. It is what every request pays for the
// arrival clock graceful stops wait on (graylb's Quiet).
func BenchmarkAdmit(b *testing.B) {
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	defer lb.Close()
	a := adapter.For(lb).Admitter()
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		carrier mapCarrier
	}{{"none", mapCarrier{}}, {"gray", mapCarrier{"gray": "true"}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					a.Admit(ctx, c.carrier, adapter.Admission{})
				}
			})
		})
	}
}
