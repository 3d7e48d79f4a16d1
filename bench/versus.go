package bench

import (
	"context"
	"time"
)

// Versus makes picks picks with each picker over the same two requests, in
// alternating batches of 1000 (so the clock's own cost and a noisy
// machine's drift fall on all of them alike), and returns each picker's
// time per pick in nanoseconds, in the order given.
func Versus(reqs [2]context.Context, picks int, pickers ...Picker) []float64 {
	const batch = 1000
	total := make([]time.Duration, len(pickers))
	for done := 0; done < picks; done += batch {
		for k, p := range pickers {
			start := time.Now()
			for i := 0; i < batch; i++ {
				p.Pick(reqs[i&1])
			}
			total[k] += time.Since(start)
		}
	}
	n := float64((picks + batch - 1) / batch * batch)
	out := make([]float64, len(pickers))
	for k, t := range total {
		out[k] = float64(t.Nanoseconds()) / n
	}
	return out
}
