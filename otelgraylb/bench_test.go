package otelgraylb_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/stretchr/testify/require"
)

// BenchmarkPick measures graylb's pick with the metrics Observer off and
// on, in the same run: the difference is the cost of the metrics on the
// pick path (an SDK counter behind a ManualReader).
func BenchmarkPick(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "metrics=off"
		var opts []graylb.Option
		if on {
			name = "metrics=on"
			_, mp := newMeter(b)
			obs, err := otelgraylb.Observer(mp.Meter(otelgraylb.ScopeName))
			require.NoError(b, err)
			opts = append(opts, graylb.WithObserver(obs))
		}
		reg := registry(b, "svc", false, false, true, true)
		lb, err := graylb.New(reg, opts...)
		require.NoError(b, err)
		ctx := context.Background()
		_, err = lb.Pick(ctx, "svc")
		require.NoError(b, err)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := lb.Pick(ctx, "svc"); err != nil {
					b.Fatal(err)
				}
			}
		})
		lb.Close()
	}
}
