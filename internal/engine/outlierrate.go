package engine

import "math"

// The failure-rate test (see OutlierConfig). An instance's failure ratio
// q over n calls of one kind of request is above its baseline p when
// q - p >= rateMinGap and n·D(q‖p) >= rateEvidence, where D is the
// Kullback-Leibler divergence of two Bernoulli laws: by the Chernoff
// bound, a ratio that high comes by chance with a probability below
// exp(-rateEvidence), 1 in 10 000. The baseline is the other prod
// instances' ratio over all their calls in the window, (failed + 1) /
// (calls + 2), which a baseline that saw no failure yet does not put at
// zero.
const (
	rateMinGap      = 0.05
	rateEvidence    = 9.21 // ln 10 000
	rateMinFailures = 3    // the test waits for this many failures of the kind in the window
)

// tick starts a new bucket of the rate window once the current one is
// half a window old: the counts of the current bucket become the previous
// bucket's (both are cleared after a whole window without results).
func (h *health) tick(now int64) {
	if h.bucket == 0 {
		return
	}
	w := h.window.Load()
	if now-w < h.bucket || !h.window.CompareAndSwap(w, now) {
		return
	}
	stale := now-w >= 2*h.bucket
	for _, s := range h.table.Load().byAddr {
		for k := range s.by {
			sl := &s.by[k]
			c, f := sl.calls.Swap(0), sl.failed.Swap(0)
			if stale {
				c, f = 0, 0
			}
			sl.prevCalls.Store(c)
			sl.prevFailed.Store(f)
		}
	}
}

// judgeRate runs the failure-rate tests on s for requests of kind k after
// one of them failed, and ejects s for that kind when one says so. It
// reads every instance's counts: O(instances) per failure, none per
// success.
func (h *health) judgeRate(s *Stats, k Kind) {
	if h.bucket == 0 {
		return
	}
	sl := &s.by[k]
	n := sl.calls.Load() + sl.prevCalls.Load()
	f := sl.failed.Load() + sl.prevFailed.Load()
	if n < int64(h.cfg.RateMinRequests) || f < rateMinFailures || sl.out.Load() {
		return
	}
	if f*100 >= int64(h.cfg.FailurePercentage)*n {
		h.takeOut(s, 1<<k, reasonPercentage, 0)
		return
	}
	var bn, bf int64 // the baseline: the other prod instances
	for _, o := range h.table.Load().byAddr {
		if o == s || o.gray.Load() {
			continue
		}
		for i := range o.by {
			ol := &o.by[i]
			bn += ol.calls.Load() + ol.prevCalls.Load()
			bf += ol.failed.Load() + ol.prevFailed.Load()
		}
	}
	if bn >= int64(h.cfg.RateMinRequests) && rateAbove(f, n, bf, bn) {
		h.takeOut(s, 1<<k, reasonRate, 0)
	}
}

// rateAbove reports whether f failures of n calls are above a baseline of
// bf failures of bn calls (see rateMinGap).
func rateAbove(f, n, bf, bn int64) bool {
	q := float64(f) / float64(n)
	p := (float64(bf) + 1) / (float64(bn) + 2)
	return q-p >= rateMinGap && float64(n)*bernoulliKL(q, p) >= rateEvidence
}

// bernoulliKL is D(q‖p) for Bernoulli laws, 0 < p < 1.
func bernoulliKL(q, p float64) float64 {
	d := 0.0
	if q > 0 {
		d += q * math.Log(q/p)
	}
	if q < 1 {
		d += (1 - q) * math.Log((1-q)/(1-p))
	}
	return d
}
