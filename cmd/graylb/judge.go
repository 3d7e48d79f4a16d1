package main

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// sample is what one kind's callers saw since the step began.
type sample struct {
	Requests float64 // calls completed
	Errors   float64 // of which failed
	// Buckets is the call-duration histogram (cumulative counts by upper
	// bound, in seconds): what the latency tests read.
	Buckets []bucket
}

// P99 is the 99th percentile of the calls' duration in seconds as the
// histogram gives it (interpolated inside a bucket), NaN when unknown. It
// is shown, not judged on: a p99 of a hundred calls read off coarse buckets
// moves by a bucket's width with one call.
func (s sample) P99() float64 { return quantile(spans(s.Buckets), 0.99) }

// MarshalJSON writes the counts, and the p99 when there is one (JSON has
// no NaN).
func (s sample) MarshalJSON() ([]byte, error) {
	out := struct {
		Requests float64  `json:"requests"`
		Errors   float64  `json:"errors"`
		P99      *float64 `json:"p99Seconds,omitempty"`
	}{Requests: finite(s.Requests), Errors: finite(s.Errors)}
	if p := s.P99(); validLatency(p) {
		out.P99 = &p
	}
	return json.Marshal(out)
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// ErrorRatio is Errors/Requests, 0 without requests.
func (s sample) ErrorRatio() float64 {
	if !(s.Requests > 0) {
		return 0
	}
	return s.Errors / s.Requests
}

// thresholds say how much worse than prod gray may be.
type thresholds struct {
	// MinRequests: gray must have completed at least this many calls in
	// the step before it is judged (prod too, to be compared with).
	MinRequests float64
	// MaxErrorIncrease: gray's error ratio may exceed prod's by at most
	// this (0.01: one point of percentage).
	MaxErrorIncrease float64
	// MaxLatencyRatio and LatencySlack: gray's calls may take up to
	// MaxLatencyRatio × prod's + LatencySlack; 0 turns latency off.
	MaxLatencyRatio float64
	LatencySlack    time.Duration
	// FailureLimit: checks in a row that must find gray worse before it is
	// rolled back (1: the first); a difference beyond doubt rolls back at
	// once whatever the limit.
	FailureLimit int
}

// The levels of evidence. A check finds gray worse when one of its three
// tests (errors, the calls' body, the tail) gives a p-value below
// pWorse/3 (Bonferroni: 1 % for the three together); FailureLimit such
// checks in a row roll back. Below pBeyondDoubt/3 one check is enough.
const (
	pWorse       = 0.01
	pBeyondDoubt = 0.001
	// tailQuantile and minTailShare: the tail test asks whether more gray
	// calls than prod's exceed the allowance over prod's p99 (prod's share
	// taken as at least minTailShare: a share read off a histogram of
	// prod's calls is never known to be 0).
	tailQuantile = 0.99
	minTailShare = 0.001
	// minTailCalls: the tail test finds nothing in fewer gray calls beyond
	// the allowance. A stall of the caller's or an instance's process (a
	// collection, a descheduled thread) delays the few calls in flight at
	// once, so slow calls come in clusters, not one by one as the test
	// assumes: four slow gray calls of one stall rolled an identical build
	// back. A real regression of the tail shows in many more once a step
	// has the calls to judge it (a build three times slower: 18 to 28 of
	// about 110 gray calls).
	minTailCalls = 8
)

// The tail test and stalls: the calls a stall delays end together, within
// one scrape of the caller, so they come in one check's calls; eight of
// them (8 of 622 gray calls past prod's p99 × 1.5 + 10 ms, the machine
// at load average 6) rolled a build identical to prod back, beyond doubt
// in one check. A check's sample counts the step's calls from its write,
// so the next check still holds them: asking for FailureLimit checks in a
// row alone would have rolled it back a second later. So the tail test
// leaves out the calls of the check that brought the most slow gray calls
// (see burst), and the tail alone is never beyond doubt: it rolls back
// after FailureLimit checks in a row that find it. A regression of the
// tail brings slow calls at every check and is found all the same, a
// check or two later.

// verdict is the judge's answer.
type verdict int

const (
	verdictWait      verdict = iota // too little traffic to judge
	verdictHealthy                  // no evidence that gray is worse than the thresholds allow
	verdictWorse                    // evidence that gray is worse, not yet FailureLimit checks in a row
	verdictUnhealthy                // gray is worse: roll back
)

func (v verdict) String() string {
	switch v {
	case verdictHealthy:
		return "healthy"
	case verdictWorse:
		return "worse"
	case verdictUnhealthy:
		return "unhealthy"
	default:
		return "wait"
	}
}

// stepJudge judges the checks of one step, counting the checks in a row
// that found gray worse. The zero stepJudge is not usable: see newStepJudge.
type stepJudge struct {
	th     thresholds
	streak int
	// earlier are gray's samples at the step's earlier checks (each from
	// the step's write): what the tail test reads to tell a stall's
	// cluster of slow calls from a slower tail.
	earlier []sample
}

func newStepJudge(th thresholds) *stepJudge {
	if th.FailureLimit < 1 {
		th.FailureLimit = 1
	}
	return &stepJudge{th: th}
}

// check judges one poll's samples (each from the step's start).
func (j *stepJudge) check(gray, prod sample) (verdict, string) {
	v, why := judgeAgainst(gray, prod, j.th, j.earlier)
	j.earlier = append(j.earlier, gray)
	switch v {
	case verdictWorse:
		j.streak++
		if j.streak >= j.th.FailureLimit {
			return verdictUnhealthy, why
		}
		return verdictWorse, fmt.Sprintf("%s (check %d of %d in a row before a rollback)", why, j.streak, j.th.FailureLimit)
	case verdictUnhealthy:
		j.streak++
	default:
		j.streak = 0
	}
	return v, why
}

// judge compares gray with prod in one check: verdictUnhealthy for a
// difference beyond doubt, verdictWorse for evidence, verdictHealthy for
// none, verdictWait without enough gray calls. Without enough prod calls
// to compare with (the canary at 100 %, or a quiet service) gray is held
// to prod's ideal: no errors beyond MaxErrorIncrease, and no latency
// bound. NaN and negative counts (a counter reset, garbage from the
// server) count as no calls; a gray failed-call count that is not a
// finite, non-negative number says nothing of gray's errors, so the judge
// waits rather than take it as none.
//
// The tail test finds nothing in a single check (see burst): judge
// without a step's earlier checks judges on the errors and the calls'
// body alone.
func judge(gray, prod sample, th thresholds) (verdict, string) {
	return judgeAgainst(gray, prod, th, nil)
}

// judgeAgainst is judge with gray's samples at the step's earlier checks,
// each from the step's write, in order: the tail test leaves out the calls
// of the check that brought the most slow gray calls, and a tail beyond
// the allowance is at most worse (never beyond doubt) in one check.
func judgeAgainst(gray, prod sample, th thresholds, earlier []sample) (verdict, string) {
	grayErrs := gray.Errors
	clean := func(s sample) sample {
		if !(s.Requests >= 0) || math.IsInf(s.Requests, 0) {
			s.Requests = 0
		}
		if !(s.Errors >= 0) || math.IsInf(s.Errors, 0) {
			s.Errors = 0
		}
		s.Errors = math.Min(s.Errors, s.Requests)
		return s
	}
	gray, prod = clean(gray), clean(prod)
	if gray.Requests < th.MinRequests || gray.Requests == 0 {
		return verdictWait, fmt.Sprintf("gray completed %.0f calls in the step, at least %.0f needed to judge", gray.Requests, th.MinRequests)
	}
	if !(grayErrs >= 0) || math.IsInf(grayErrs, 0) {
		return verdictWait, fmt.Sprintf("gray's failed-call count in the step is %v, not a number of calls: no verdict on it", grayErrs)
	}
	prodBase := prod.Requests >= th.MinRequests && prod.Requests > 0
	// worst is the smallest p-value of the three tests, calls the smallest
	// of the errors' and the body's: the tail alone is never beyond doubt.
	worst, why := 1.0, ""
	calls, callsWhy := 1.0, ""
	note := func(p float64, text string, tail bool) {
		if p < worst {
			worst, why = p, text
		}
		if !tail && p < calls {
			calls, callsWhy = p, text
		}
	}

	np, pe := 0.0, 0.0
	if prodBase {
		np, pe = prod.Requests, prod.Errors
	}
	pErr := moreErrorsTest(gray.Errors, gray.Requests, pe, np, th.MaxErrorIncrease)
	errText := fmt.Sprintf("gray error ratio %.2f%% (%.0f of %.0f calls) vs prod's %.2f%%%s, allowed %.2f points more (p = %s)",
		gray.ErrorRatio()*100, gray.Errors, gray.Requests, ratioOf(prodBase, prod)*100, baseNote(prodBase, prod), th.MaxErrorIncrease*100, pText(pErr))
	note(pErr, errText, false)

	latency := ", latency not compared (no histogram for both kinds)"
	gs, ps := spans(gray.Buckets), spans(prod.Buckets)
	if prodBase && gs != nil && ps != nil && th.MaxLatencyRatio > 0 {
		slack := th.LatencySlack.Seconds()
		theta, pBody := slowerTest(gs, ps, th.MaxLatencyRatio, slack)
		note(pBody, fmt.Sprintf("gray's calls are slower than prod's × %g + %s: a gray call outlasts one of prod's so stretched %.0f%% of the time (p = %s; median %s vs prod's %s)",
			th.MaxLatencyRatio, th.LatencySlack, theta*100, pText(pBody), secs(quantile(gs, 0.5)), secs(quantile(ps, 0.5))), false)
		bound := quantile(ps, tailQuantile)*th.MaxLatencyRatio + slack
		burstSlow, burstCalls := burst(earlier, gs, bound)
		slow, n := above(gs, bound)-burstSlow, countOf(gs)-burstCalls
		usual := n * math.Max(above(ps, bound)/countOf(ps), minTailShare)
		pTail := 1.0
		if slow >= minTailCalls {
			pTail = poissonTail(slow, usual)
		}
		tailText := fmt.Sprintf("%.0f of gray's %.0f calls took longer than %s (prod's p99 %s × %g + %s), where %.1f would be as many as prod's (p = %s), leaving out the %.0f slow calls of %.0f of the check that brought the most",
			slow, n, secs(bound), secs(quantile(ps, tailQuantile)), th.MaxLatencyRatio, th.LatencySlack, usual, pText(pTail), burstSlow, burstCalls)
		if pTail < pBeyondDoubt/3 {
			tailText += fmt.Sprintf(" (the tail alone rolls back after %d checks in a row that find it)", th.FailureLimit)
		}
		note(pTail, tailText, true)
		latency = fmt.Sprintf(", median %s vs prod's %s, p99 %s vs %s", secs(quantile(gs, 0.5)), secs(quantile(ps, 0.5)),
			secs(quantile(gs, 0.99)), secs(quantile(ps, 0.99)))
	}
	switch {
	case calls < pBeyondDoubt/3:
		return verdictUnhealthy, callsWhy
	case worst < pWorse/3:
		return verdictWorse, why
	}
	return verdictHealthy, fmt.Sprintf("no evidence gray is worse: error ratio %.2f%% over %.0f calls vs prod's %.2f%%%s%s",
		gray.ErrorRatio()*100, gray.Requests, ratioOf(prodBase, prod)*100, baseNote(prodBase, prod), latency)
}

func ratioOf(prodBase bool, prod sample) float64 {
	if prodBase {
		return prod.ErrorRatio()
	}
	return 0
}

func baseNote(prodBase bool, prod sample) string {
	if prodBase {
		return fmt.Sprintf(" (%.0f calls)", prod.Requests)
	}
	return fmt.Sprintf(" (taken as 0: prod completed only %.0f calls)", prod.Requests)
}

// pText writes a p-value for a person: small ones as an upper bound.
func pText(p float64) string {
	if p < 1e-6 {
		return "< 0.000001"
	}
	return fmt.Sprintf("%.2g", p)
}

func validLatency(s float64) bool { return s >= 0 && !math.IsInf(s, 0) && !math.IsNaN(s) }

func secs(s float64) string {
	if !validLatency(s) {
		return "unknown"
	}
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}

// burst returns, of the step's checks (the samples earlier, then the
// histogram now, each from the step's write), the slow gray calls (longer
// than bound) that the check bringing the most of them brought, and the
// calls it brought: what the tail test leaves out. A stall's cluster comes
// in one check; at the step's first check, every call is that check's.
func burst(earlier []sample, now []span, bound float64) (slow, calls float64) {
	prevSlow, prevCalls := 0.0, 0.0
	take := func(s []span) {
		sl, n := above(s, bound), countOf(s)
		if d := sl - prevSlow; d > slow {
			slow, calls = d, math.Max(n-prevCalls, 0)
		}
		prevSlow, prevCalls = sl, n
	}
	for _, e := range earlier {
		take(spans(e.Buckets))
	}
	take(now)
	return slow, calls
}
