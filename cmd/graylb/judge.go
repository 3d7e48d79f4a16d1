package main

import (
	"fmt"
	"math"
	"time"
)

// sample is what one kind's callers saw over the judging window.
type sample struct {
	Requests float64 `json:"requests"` // calls completed
	Errors   float64 `json:"errors"`   // of which failed
	// P99 is the 99th percentile of the call duration, in seconds; NaN
	// when unknown (no calls, or Prometheus could not say).
	P99 float64 `json:"p99Seconds"`
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
	// the window before it is judged (prod too, to be compared with).
	MinRequests float64
	// MaxErrorIncrease: gray's error ratio may exceed prod's by at most
	// this (0.01: one point of percentage).
	MaxErrorIncrease float64
	// MaxLatencyRatio and LatencySlack: gray's p99 may be at most
	// MaxLatencyRatio × prod's p99 + LatencySlack.
	MaxLatencyRatio float64
	LatencySlack    time.Duration
}

// verdict is the judge's answer.
type verdict int

const (
	verdictWait      verdict = iota // too little traffic to judge
	verdictHealthy                  // gray is not worse than prod beyond the thresholds
	verdictUnhealthy                // gray is worse: roll back
)

func (v verdict) String() string {
	switch v {
	case verdictHealthy:
		return "healthy"
	case verdictUnhealthy:
		return "unhealthy"
	default:
		return "wait"
	}
}

// judge compares gray with prod. Without enough gray calls it waits.
// Without enough prod calls to compare with (the canary at 100 %, or a
// quiet service) gray is held to prod's ideal: an error ratio of at most
// MaxErrorIncrease, and no latency bound. NaN and negative counts (a
// counter reset, garbage from the server) count as no calls; a gray
// failed-call count that is not a finite, non-negative number says nothing
// of gray's errors, so the judge waits rather than take it as none.
func judge(gray, prod sample, th thresholds) (verdict, string) {
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
		return verdictWait, fmt.Sprintf("gray completed %.0f calls in the window, at least %.0f needed to judge", gray.Requests, th.MinRequests)
	}
	if !(grayErrs >= 0) || math.IsInf(grayErrs, 0) {
		return verdictWait, fmt.Sprintf("gray's failed-call count in the window is %v, not a number of calls: no verdict on it", grayErrs)
	}
	prodBase := prod.Requests >= th.MinRequests && prod.Requests > 0
	baseRatio := 0.0
	if prodBase {
		baseRatio = prod.ErrorRatio()
	}
	gr := gray.ErrorRatio()
	if gr > baseRatio+th.MaxErrorIncrease {
		return verdictUnhealthy, fmt.Sprintf("gray error ratio %.2f%% (%.0f of %.0f calls) exceeds prod's %.2f%%%s by more than %.2f points",
			gr*100, gray.Errors, gray.Requests, baseRatio*100, baseNote(prodBase, prod), th.MaxErrorIncrease*100)
	}
	latency := ""
	if prodBase && validLatency(prod.P99) && validLatency(gray.P99) && th.MaxLatencyRatio > 0 {
		bound := prod.P99*th.MaxLatencyRatio + th.LatencySlack.Seconds()
		if gray.P99 > bound {
			return verdictUnhealthy, fmt.Sprintf("gray p99 latency %s exceeds %s (prod's p99 %s × %g + %s)",
				secs(gray.P99), secs(bound), secs(prod.P99), th.MaxLatencyRatio, th.LatencySlack)
		}
		latency = fmt.Sprintf(", p99 %s vs prod's %s", secs(gray.P99), secs(prod.P99))
	} else {
		latency = ", latency not compared (no p99 for both kinds)"
	}
	return verdictHealthy, fmt.Sprintf("gray error ratio %.2f%% over %.0f calls vs prod's %.2f%%%s%s",
		gr*100, gray.Requests, baseRatio*100, baseNote(prodBase, prod), latency)
}

func baseNote(prodBase bool, prod sample) string {
	if prodBase {
		return fmt.Sprintf(" (%.0f calls)", prod.Requests)
	}
	return fmt.Sprintf(" (taken as 0: prod completed only %.0f calls)", prod.Requests)
}

func validLatency(s float64) bool { return s >= 0 && !math.IsInf(s, 0) && !math.IsNaN(s) }

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}
