package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The calls a step is judged on, against a real Prometheus holding known
// samples (written into its storage before it starts, so that the test
// waits on no scrape): the step's window runs from stepStart to stepEnd,
// samples are 10 s apart, and three callers of each service are seen:
//
//   - a: scraped all along; its gray series are born in the step (the
//     canary's first gray calls, a gray build's first failed calls), so
//     they count whole;
//   - b: a caller first scraped 40 s into the step (discovered late), with
//     a history of calls made before the step;
//   - c: a caller whose scrapes failed from 400 s before the step (longer
//     than Prometheus' 5-minute look-back) until 50 s into it, which made
//     calls in between.
//
// b and c count only what their series grew by after their first sample
// in the step. Counting their history rolled back a healthy build (b's
// history is the 22.63 %, 314 of 1390 calls, of a rollout rolled back
// while both callers were at 0.5 %) and passed one failing a fifth of its
// calls (b's history is 100 000 good gray calls).

const (
	stepEvery = 10   // seconds between samples
	stepStart = 1200 // the step's write: seconds after the data's origin
	stepLen   = 120  // the step's window, seconds
	stepEnd   = stepStart + stepLen
)

// synthSeries is one counter series of the histogram: a caller's calls of
// service of kind with outcome, sampled every stepEvery seconds over
// spans (seconds, inclusive), valued at(t) then.
type synthSeries struct {
	instance, service, kind, outcome string
	spans                            [][2]int
	at                               func(t int) float64
}

// grows is a counter of rate calls a second from born (s), holding base
// more from before.
func grows(base, rate float64, born int) func(int) float64 {
	return func(t int) float64 { return base + rate*float64(t-born) }
}

// stepCallers are the three callers of service: a's gray series born at
// grayBorn and grayErrBorn, its gray calls failing grayErr of the time; b's
// and c's histories (gray calls and failed gray calls before the step).
func stepCallers(service string, grayErr float64, bHist, bHistErr, cHist, cHistErr float64) []synthSeries {
	const prodRate, grayRate = 20.0, 2.0
	all := [][2]int{{0, stepEnd}}
	late := [][2]int{{stepStart + 40, stepEnd}}
	gap := [][2]int{{stepStart - 900, stepStart - 400}, {stepStart + 50, stepEnd}}
	out := []synthSeries{
		{"a:1", service, "prod", "ok", all, grows(0, prodRate*0.995, 0)},
		{"a:1", service, "prod", "error", all, grows(0, prodRate*0.005, 0)},
		// Born in the step: the canary's first gray calls 3 s after its
		// write; the first failed ones 15 s after, twenty at once (a build
		// failing its first calls), so that what the series counted before
		// its first sample is far from what increase would extrapolate.
		{"a:1", service, "gray", "ok", [][2]int{{stepStart + 10, stepEnd}}, grows(0, grayRate*(1-grayErr), stepStart+3)},
		{"a:1", service, "gray", "error", [][2]int{{stepStart + 20, stepEnd}}, grows(20, grayRate*grayErr, stepStart+15)},

		{"b:1", service, "prod", "ok", late, grows(90_000, prodRate*0.995, stepStart)},
		{"b:1", service, "prod", "error", late, grows(450, prodRate*0.005, stepStart)},
		{"b:1", service, "gray", "ok", late, grows(bHist-bHistErr, grayRate*(1-grayErr), stepStart)},
		{"b:1", service, "gray", "error", late, grows(bHistErr, grayRate*grayErr, stepStart)},

		{"c:1", service, "prod", "ok", gap, grows(50_000, prodRate*0.995, stepStart)},
		{"c:1", service, "prod", "error", gap, grows(250, prodRate*0.005, stepStart)},
		{"c:1", service, "gray", "ok", gap, grows(cHist-cHistErr, grayRate*(1-grayErr), stepStart)},
		{"c:1", service, "gray", "error", gap, grows(cHistErr, grayRate*grayErr, stepStart)},
	}
	if grayErr == 0 {
		// A healthy build fails no call in the step: its error series are
		// those of the history alone (a's has none).
		out = append(out[:3], out[4:]...)
	}
	return out
}

// stepWant is what the step's calls of kind must count for service:
// between lo and hi (a late series' growth is extrapolated by Prometheus
// by up to half a sample interval).
func stepWant(ss []synthSeries, service, kind, outcome string) (lo, hi float64) {
	for _, s := range ss {
		if s.service != service || s.kind != kind || (outcome != "" && s.outcome != outcome) {
			continue
		}
		first := s.spans[len(s.spans)-1][0]
		switch {
		case first <= stepStart-stepEvery: // present when the step began
			lo += s.at(stepEnd) - s.at(stepStart)
			hi += s.at(stepEnd) - s.at(stepStart)
		case s.instance == "a:1": // born in the step, on a caller scraped all along
			lo += s.at(stepEnd)
			hi += s.at(stepEnd)
		default: // its caller first scraped (again) in the step
			g := s.at(stepEnd) - s.at(first)
			lo += g
			hi += g * (1 + 0.5*stepEvery/float64(stepEnd-first))
		}
	}
	return lo, hi
}

// backfill writes ss as OpenMetrics samples from origin and turns them
// into Prometheus storage blocks in a new folder, which it returns.
func backfill(t *testing.T, origin int64, ss []synthSeries) string {
	t.Helper()
	promtool := need(t, "promtool", "prometheus")
	var b strings.Builder
	b.WriteString("# TYPE graylb_client_call_duration_seconds histogram\n")
	for _, s := range ss {
		for _, sp := range s.spans {
			for at := sp[0]; at <= sp[1]; at += stepEvery {
				labels := fmt.Sprintf(`job="callers",instance=%q,graylb_service=%q,graylb_kind=%q,graylb_call_outcome=%q`, s.instance, s.service, s.kind, s.outcome)
				v, ts := s.at(at), origin+int64(at)
				// Every call took 20 ms: all in the 25 ms bucket.
				fmt.Fprintf(&b, "graylb_client_call_duration_seconds_bucket{%s,le=\"0.01\"} 0 %d\n", labels, ts)
				fmt.Fprintf(&b, "graylb_client_call_duration_seconds_bucket{%s,le=\"0.025\"} %g %d\n", labels, v, ts)
				fmt.Fprintf(&b, "graylb_client_call_duration_seconds_bucket{%s,le=\"+Inf\"} %g %d\n", labels, v, ts)
				fmt.Fprintf(&b, "graylb_client_call_duration_seconds_count{%s} %g %d\n", labels, v, ts)
				fmt.Fprintf(&b, "graylb_client_call_duration_seconds_sum{%s} %g %d\n", labels, v*0.02, ts)
			}
		}
	}
	b.WriteString("# EOF\n")
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.om")
	if err := os.WriteFile(in, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", in, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	return data
}

func TestIntegration_StepCountsOnlyItsCalls(t *testing.T) {
	integration(t)
	// The data end a few minutes ago (inside the retention, outside the
	// head Prometheus starts with).
	origin := time.Now().Add(-time.Duration(stepEnd)*time.Second - 5*time.Minute).Unix()
	healthy := stepCallers("ledger-healthy", 0, 1390, 314, 3000, 2000)
	bad := stepCallers("ledger-bad", 0.2, 100_000, 0, 50_000, 0)
	data := backfill(t, origin, append(append([]synthSeries{}, healthy...), bad...))
	prom := startPrometheusWith(t, "global:\n  scrape_interval: 10s\n", data)
	p := &prometheus{base: prom, client: &http.Client{Timeout: 10 * time.Second}}
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond, FailureLimit: 1}
	end := time.Unix(origin+stepEnd, 0)
	for _, tc := range []struct {
		service string
		ss      []synthSeries
		want    verdict
	}{
		{"ledger-healthy", healthy, verdictHealthy},
		{"ledger-bad", bad, verdictUnhealthy},
	} {
		t.Run(tc.service, func(t *testing.T) {
			// Both services in one query, as a rollout judging both reads them.
			got, err := p.compare(context.Background(), queriesFor(defaultMetric, []string{"ledger-healthy", "ledger-bad"}, stepLen*time.Second), end)
			if err != nil {
				t.Fatal(err)
			}
			gray, prod := got[tc.service].gray, got[tc.service].prod
			check := func(what string, got float64, kind, outcome string) {
				t.Helper()
				lo, hi := stepWant(tc.ss, tc.service, kind, outcome)
				if got < lo-0.5 || got > hi+0.5 {
					t.Errorf("%s: %.1f counted, %.1f to %.1f made in the step", what, got, lo, hi)
				}
			}
			check("gray calls", gray.Requests, "gray", "")
			check("failed gray calls", gray.Errors, "gray", "error")
			check("prod calls", prod.Requests, "prod", "")
			check("failed prod calls", prod.Errors, "prod", "error")
			for _, b := range gray.Buckets {
				if b.Le == 0.025 || math.IsInf(b.Le, 1) {
					check(fmt.Sprintf("gray calls of at most %g s", b.Le), b.Count, "gray", "")
				}
			}
			v, why := judge(gray, prod, th)
			if v != tc.want {
				t.Errorf("judged %v (%s), want %v", v, why, tc.want)
			}
			t.Logf("gray %.0f calls, %.0f failed; prod %.0f, %.0f failed: %v: %s", gray.Requests, gray.Errors, prod.Requests, prod.Errors, v, why)
		})
	}
}
