package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// The judge's error rates, by simulation: rollouts of three steps, each
// judged by a poll every tenth of the step on the calls made since the
// step's write, gray growing to about 300 calls a step and prod to about
// 2 900 (canaries of about 100 gray calls a window, as judged at the
// defaults: --min-requests 100, --max-error-increase 0.01,
// --max-latency-ratio 1.5, --latency-slack 10ms, --failure-limit 2). Calls
// take 15 ms plus an exponential time of mean 15 ms (a median near 25 ms),
// fail 0.5 % of the time, and fall in otelgraylb's buckets.
//
// GRAYLB_JUDGE_ROLLOUTS sets the number of simulated rollouts per build
// (default 2000); docs/operations.md quotes a run of 20 000.

// simBuild is how a build's calls behave.
type simBuild struct {
	errRatio float64
	slower   float64 // every call takes this many times as long
	// stall: at one poll of the rollout, chosen at random, this many more
	// gray calls end together, each after 400 ms (a stall of the caller's
	// or the gray instance's process delays the calls in flight at once).
	stall int
}

// simStep returns the poll-by-poll samples of one step: the calls of kind
// made since the step's write, at each tenth of the step.
func simStep(rng *rand.Rand, b simBuild, calls int, stallAt int) []sample {
	out := make([]sample, 10)
	var s sample
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, math.Inf(1)}
	s.Buckets = make([]bucket, len(bounds))
	for k, v := range bounds {
		s.Buckets[k].Le = v
	}
	per := calls / 10
	for poll := range out {
		n := per
		if poll == stallAt {
			n += b.stall
		}
		for i := 0; i < n; i++ {
			s.Requests++
			if rng.Float64() < b.errRatio {
				s.Errors++
			}
			d := b.slower * (0.015 + rng.ExpFloat64()*0.015)
			if poll == stallAt && i >= per {
				d = 0.4
			}
			for k := range s.Buckets {
				if d <= s.Buckets[k].Le {
					s.Buckets[k].Count++
				}
			}
		}
		out[poll] = s
		out[poll].Buckets = append([]bucket(nil), s.Buckets...)
	}
	return out
}

// simRollout runs one rollout of gray build g against prod: whether it
// rolled back, and at which poll after gray first had enough calls.
func simRollout(rng *rand.Rand, g simBuild) (rolledBack bool, pollsAfterEnough int) {
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond, FailureLimit: 2}
	prodBuild := simBuild{errRatio: 0.005, slower: 1}
	stallAt := rng.IntN(30) // the poll of the rollout (of three steps of ten) its stall comes in
	for step := 0; step < 3; step++ {
		gray := simStep(rng, g, 250+rng.IntN(100), stallAt-10*step)
		prod := simStep(rng, prodBuild, 2800+rng.IntN(200), -1)
		j := newStepJudge(th)
		enough := -1
		for poll := range gray {
			if enough < 0 && gray[poll].Requests >= th.MinRequests {
				enough = poll
			}
			if v, _ := j.check(gray[poll], prod[poll]); v == verdictUnhealthy {
				return true, poll - enough
			}
		}
	}
	return false, 0
}

func TestJudgeRates(t *testing.T) {
	n := 2000
	if v := os.Getenv("GRAYLB_JUDGE_ROLLOUTS"); v != "" {
		fmt.Sscan(v, &n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name     string
		build    simBuild
		maxShare float64 // of rollouts rolled back (identical build), or min (bad builds)
		bad      bool
	}{
		{"identical to prod", simBuild{errRatio: 0.005, slower: 1}, 0.05, false},
		// A stall of the process delays a cluster of calls, not one call
		// here and there: the tail test, which supposes the latter, rolled
		// back a build identical to prod in a single check when 8 gray calls
		// of one stall took longer than prod's p99 × 1.5 + 10 ms.
		{"identical to prod, one stall delays 10 gray calls at once", simBuild{errRatio: 0.005, slower: 1, stall: 10}, 0.05, false},
		{"20 % errors", simBuild{errRatio: 0.20, slower: 1}, 1, true},
		{"three times slower", simBuild{errRatio: 0.005, slower: 3}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			back, late := 0, 0
			for i := 0; i < n; i++ {
				rb, after := simRollout(rng, tc.build)
				if rb {
					back++
					if after > 1 {
						late++
					}
				}
			}
			share := float64(back) / float64(n)
			t.Logf("%s: rolled back %d of %d rollouts (%.2f %%); %d later than two polls after gray had enough calls", tc.name, back, n, share*100, late)
			switch {
			case !tc.bad && share > tc.maxShare:
				t.Errorf("a build identical to prod rolled back in %.2f %% of rollouts, at most %.0f %% wanted", share*100, tc.maxShare*100)
			case tc.bad && (back != n || late > n/1000):
				t.Errorf("a bad build rolled back in %d of %d rollouts, %d late; all, within two polls in 999 of 1000, wanted", back, n, late)
			}
		})
	}
}

// A step's report is JSON whatever the samples hold: a kind without a
// histogram has no p99, and JSON has no NaN (a rollout's -o json printed
// nothing when a kind's p99 was unknown).
func TestStepReportJSONWithoutAP99(t *testing.T) {
	gray := sample{Requests: 200, Errors: math.NaN()}
	prod := sample{Requests: 0, Buckets: []bucket{{Le: 0.01, Count: 3}, {Le: math.Inf(1), Count: 3}}}
	b, err := json.Marshal(stepReport{Canary: 5, Verdict: "wait", Gray: &gray, Prod: &prod})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, `"gray":{"requests":200,"errors":0}`) && strings.Contains(s, `"p99Seconds":0.0098`) {
		return
	}
	t.Fatalf("report %s", b)
}
