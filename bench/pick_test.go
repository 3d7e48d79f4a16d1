package bench

import (
	"fmt"
	"testing"

	"github.com/graylb/graylb/policy"
)

// BenchmarkPickVsGRPCRoundRobin runs graylb's gray+version pick (round
// robin) by the service's name and through its ServicePicker, and grpc-go's
// round_robin Pick (no filtering), over the same list in alternating
// batches (Versus), and reports graylb's times as ratios of grpc-go's
// ("ratio" by name, "ratio-service" per service). The target is a ratio
// of at most 1 at every size, with 0 allocations.
func BenchmarkPickVsGRPCRoundRobin(b *testing.B) {
	reqs := Requests()
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			var pickers []Picker
			for _, p := range []Peer{Graylb("round robin", policy.RoundRobin()), GraylbService("round robin", policy.RoundRobin()), GRPCRoundRobin()} {
				pk, err := p.Build(Instances(n))
				if err != nil {
					b.Fatal(err)
				}
				defer pk.Close()
				pickers = append(pickers, pk)
			}
			b.ReportAllocs()
			b.ResetTimer()
			ns := Versus(reqs, b.N, pickers...)
			b.StopTimer()
			b.ReportMetric(ns[0]/ns[2], "ratio")
			b.ReportMetric(ns[1]/ns[2], "ratio-service")
			b.ReportMetric(ns[0], "graylb-ns/pick")
			b.ReportMetric(ns[1], "service-ns/pick")
			b.ReportMetric(ns[2], "grpc-ns/pick")
		})
	}
}
