package adaptertest

import (
	"testing"
	"time"
)

// Interleave runs base and subject b.N times each, alternating which goes
// first, and reports subject's total time over base's as the "ratio"
// metric and the allocations per call subject adds as extra (for example
// "extra-allocs/req"): an adapter's overhead benchmark against the same
// call without graylb. Measuring both in one loop keeps a noisy machine's
// drift out of the ratio.
func Interleave(b *testing.B, base, subject func(), extra string) {
	b.Helper()
	var tBase, tSubject time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second, t1, t2 := base, subject, &tBase, &tSubject
		if i&1 == 1 {
			first, second, t1, t2 = subject, base, &tSubject, &tBase
		}
		s := time.Now()
		first()
		m := time.Now()
		second()
		e := time.Now()
		*t1 += m.Sub(s)
		*t2 += e.Sub(m)
	}
	b.StopTimer()
	b.ReportMetric(float64(tSubject)/float64(tBase), "ratio")
	b.ReportMetric(testing.AllocsPerRun(200, subject)-testing.AllocsPerRun(200, base), extra)
}
