package main

import (
	"math"
	"sort"
)

// The statistics the judge stands on. Each test answers one question with
// a p-value: how likely a difference at least this large would be if gray
// were no worse than the thresholds allow. A small p-value is evidence, a
// large one is not evidence of health: with few calls every p-value is
// large, which is why the judge waits for --min-requests first.

// bucket is one bucket of a call-duration histogram as Prometheus gives
// it: the calls that took at most Le seconds (cumulative).
type bucket struct {
	Le    float64 `json:"le"`
	Count float64 `json:"count"`
}

// span is the calls of one histogram bucket, spread evenly over
// (Lo, Hi]: what a histogram can say of where in a bucket its calls fell.
type span struct {
	Lo, Hi, N float64
}

// spans turns cumulative buckets (in any order, +Inf allowed) into the
// calls of each bucket. Counts that are not finite or that shrink (each
// bucket's increase is extrapolated on its own) are clamped; the +Inf
// bucket is spread over (L, 2L] past the last finite bound L. Nil when no
// call is counted.
func spans(bs []bucket) []span {
	var list []bucket
	for _, b := range bs {
		if math.IsNaN(b.Le) || b.Le < 0 || math.IsNaN(b.Count) || math.IsInf(b.Count, 0) {
			continue
		}
		list = append(list, bucket{Le: b.Le, Count: math.Max(b.Count, 0)})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Le < list[j].Le })
	var out []span
	lo, cum, total := 0.0, 0.0, 0.0
	for _, b := range list {
		hi := b.Le
		if math.IsInf(hi, 1) {
			if lo > 0 {
				hi = 2 * lo
			} else {
				hi = 1
			}
		}
		n := math.Max(b.Count-cum, 0)
		if n > 0 {
			out = append(out, span{Lo: lo, Hi: hi, N: n})
			total += n
		}
		cum = math.Max(cum, b.Count)
		lo = hi
	}
	if total == 0 {
		return nil
	}
	return out
}

// countOf is the number of calls in s.
func countOf(s []span) float64 {
	n := 0.0
	for _, x := range s {
		n += x.N
	}
	return n
}

// quantile is the q-quantile of the calls in s, interpolated linearly
// inside its bucket as Prometheus' histogram_quantile does; NaN when s is
// empty.
func quantile(s []span, q float64) float64 {
	total := countOf(s)
	if total == 0 {
		return math.NaN()
	}
	rank, cum := q*total, 0.0
	for _, x := range s {
		if cum+x.N >= rank {
			return x.Lo + (x.Hi-x.Lo)*(rank-cum)/x.N
		}
		cum += x.N
	}
	return s[len(s)-1].Hi
}

// above is how many calls of s took longer than t (those of the bucket t
// falls in counted in proportion).
func above(s []span, t float64) float64 {
	n := 0.0
	for _, x := range s {
		switch {
		case x.Lo >= t:
			n += x.N
		case x.Hi > t:
			n += x.N * (x.Hi - t) / (x.Hi - x.Lo)
		}
	}
	return n
}

// pGreater is P(X > Y) for X uniform over (x0, x1] and Y uniform over
// (y0, y1] (a bound equal to the other is a point).
func pGreater(x0, x1, y0, y1 float64) float64 {
	if x1 <= y0 {
		return 0
	}
	if x0 >= y1 {
		return 1
	}
	cdfY := func(v float64) float64 {
		switch {
		case v <= y0:
			return 0
		case v >= y1:
			return 1
		default:
			return (v - y0) / (y1 - y0)
		}
	}
	if x1 == x0 {
		return cdfY(x0)
	}
	// The mean of Y's distribution function over X's span, exactly: it is
	// piecewise linear in v, so integrate it over the three pieces.
	integral := func(a, b float64) float64 { // ∫ cdfY over [a, b]
		if b <= a {
			return 0
		}
		total := 0.0
		if lo, hi := math.Max(a, y0), math.Min(b, y1); hi > lo {
			total += ((hi-y0)*(hi-y0) - (lo-y0)*(lo-y0)) / (2 * (y1 - y0))
		}
		if lo := math.Max(a, y1); b > lo {
			total += b - lo
		}
		return total
	}
	return integral(x0, x1) / (x1 - x0)
}

// slowerTest is a one-sided Mann-Whitney test over histograms: are gray's
// calls longer than prod's calls stretched by ratio and shifted by slack
// (each prod call taking ratio × its time + slack)? It returns θ, the
// probability that a gray call takes longer than a stretched prod call
// (0.5 when they are alike; 0 when gray is within the allowance), and the
// p-value of θ under "gray no slower than the allowance", from the normal
// approximation of the U statistic (ties spread evenly inside buckets, as
// the histogram cannot say more). Buckets compare within their bounds
// only: the coarser the buckets, the more calls it needs.
func slowerTest(gray, prod []span, ratio, slack float64) (theta, p float64) {
	ng, np := countOf(gray), countOf(prod)
	if ng == 0 || np == 0 {
		return math.NaN(), 1
	}
	u := 0.0
	for _, g := range gray {
		for _, q := range prod {
			u += g.N * q.N * pGreater(g.Lo, g.Hi, q.Lo*ratio+slack, q.Hi*ratio+slack)
		}
	}
	theta = u / (ng * np)
	sd := math.Sqrt(ng * np * (ng + np + 1) / 12)
	return theta, upperTail((u - ng*np/2) / sd)
}

// moreErrorsTest is a one-sided test for two proportions: is gray's error
// ratio above prod's by more than margin? Both ratios are taken with one
// error and one success added (Agresti and Caffo's interval, which holds
// for a handful of calls and for ratios of 0 where the plain test has no
// variance). Without prod (np = 0) gray is held to the margin alone. It
// returns the p-value.
func moreErrorsTest(ge, ng, pe, np, margin float64) float64 {
	pg := (ge + 1) / (ng + 2)
	v := pg * (1 - pg) / (ng + 2)
	pp := 0.0
	if np > 0 {
		pp = (pe + 1) / (np + 2)
		v += pp * (1 - pp) / (np + 2)
	}
	return upperTail((pg - pp - margin) / math.Sqrt(v))
}

// poissonTail is P(K ≥ k) for K Poisson with mean mean: how likely k or
// more calls beyond a bound that a call passes with small probability.
func poissonTail(k, mean float64) float64 {
	k = math.Floor(k)
	if k <= 0 {
		return 1
	}
	if mean <= 0 {
		return 0
	}
	if mean > 100 { // the normal approximation, with a continuity correction
		return upperTail((k - 0.5 - mean) / math.Sqrt(mean))
	}
	// 1 − P(K ≤ k−1), summed term by term.
	term, sum := math.Exp(-mean), 0.0
	for i := 0.0; i < k; i++ {
		if i > 0 {
			term *= mean / i
		}
		sum += term
	}
	return math.Max(0, 1-sum)
}

// upperTail is P(Z > z) for a standard normal Z.
func upperTail(z float64) float64 {
	if math.IsNaN(z) {
		return 1
	}
	return 0.5 * math.Erfc(z/math.Sqrt2)
}
