package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/graylb/graylb"
)

// BenchmarkPickVsGRPCRoundRobin runs graylb's gray+version pick (round
// robin) and grpc-go's round_robin Pick (no filtering) over the same list
// in alternating batches of 1000 and reports graylb's time as a ratio of
// grpc-go's ("ratio"; batches keep the clock's own cost and a noisy
// machine's drift out of it). The target is a ratio of at most 1 at every
// size, with 0 allocations.
func BenchmarkPickVsGRPCRoundRobin(b *testing.B) {
	reqs := Requests()
	const batch = 1000
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			gl, err := Graylb("round robin", graylb.RoundRobin()).Build(Instances(n))
			if err != nil {
				b.Fatal(err)
			}
			defer gl.Close()
			rr, err := GRPCRoundRobin().Build(Instances(n))
			if err != nil {
				b.Fatal(err)
			}
			defer rr.Close()
			var tGL, tRR time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				s := time.Now()
				for i := 0; i < batch; i++ {
					rr.Pick(reqs[i&1])
				}
				m := time.Now()
				for i := 0; i < batch; i++ {
					gl.Pick(reqs[i&1])
				}
				e := time.Now()
				tRR += m.Sub(s)
				tGL += e.Sub(m)
			}
			b.StopTimer()
			b.ReportMetric(float64(tGL)/float64(tRR), "ratio")
			b.ReportMetric(float64(tGL.Nanoseconds())/float64(b.N), "graylb-ns/pick")
			b.ReportMetric(float64(tRR.Nanoseconds())/float64(b.N), "grpc-ns/pick")
		})
	}
}
