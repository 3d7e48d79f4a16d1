package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
)

// promShadow serves a fake Prometheus whose callers made calls of svc as
// tr says and told of its shadow copies what copies returns (nil: no
// series of them).
func promShadow(t testing.TB, tr traffic, copies func() *shadowSample) string {
	return fakeProm(t, func(q string) string {
		c := copies()
		switch {
		case strings.Contains(q, "_bucket"):
			return bucketVectorOf(tr.service, histOf(int(tr.grayCalls), func(int) float64 { return 0.02 }), histOf(int(tr.prodCalls), func(int) float64 { return 0.02 }))
		case strings.Contains(q, `outcome="error"`):
			return vectorOf(tr.service, "gray", fmt.Sprint(tr.grayCalls*tr.grayErrRatio), "prod", fmt.Sprint(tr.prodCalls*tr.prodErrRatio))
		case !strings.HasPrefix(q, "sum by (graylb_service, graylb_shadow_"):
			return vectorOf(tr.service, "gray", fmt.Sprint(tr.grayCalls), "prod", fmt.Sprint(tr.prodCalls))
		case c == nil:
			return vector()
		case strings.Contains(q, "graylb_shadow_outcome)"):
			return shadowVector(tr.service, "graylb_shadow_outcome", "same", c.Same, "differs", c.Differs, "failed", c.Failed, "dropped", c.Dropped, "noise", c.Noise)
		default:
			return shadowVector(tr.service, "graylb_shadow_by", "status", c.ByStatus, "latency", c.ByLatency, "body", c.ByBody)
		}
	}).URL
}

// rulesHistory records the rules as each publish left them.
type rulesHistory struct {
	mu  sync.Mutex
	all []graylb.Rules
}

func recordRules(t testing.TB, f *fakeNacos) *rulesHistory {
	h := &rulesHistory{}
	f.afterPublish = func() {
		r := storedRules(t, f)
		h.mu.Lock()
		h.all = append(h.all, r)
		h.mu.Unlock()
	}
	return h
}

// describe is the history as "shadow/canary" pairs.
func (h *rulesHistory) describe() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var parts []string
	for _, r := range h.all {
		parts = append(parts, fmt.Sprintf("%v/%v", r.ShadowPercent, r.CanaryPercent))
	}
	return strings.Join(parts, " ")
}

// shadowArgs are a rollout of svc with a short shadow phase.
func shadowArgs(f *fakeNacos, prom string, more ...string) []string {
	return rolloutArgs(f, prom, append([]string{"--shadow", "10%", "--shadow-for", "100ms", "-o", "json"}, more...)...)
}

// A gray build whose mirrored answers fail, or differ from prod's by body
// in 5 % of them, is stopped in the shadow phase: shadowPercent back to 0,
// the canary never raised, exit 3 with the evidence.
func TestShadowPhaseStopsABadBuild(t *testing.T) {
	for _, tc := range []struct {
		name   string
		copies shadowSample
		says   string
	}{
		{"failing", shadowSample{Same: 800, Differs: 0, Failed: 200}, "20.00% of the gray build's 1000 mirrored answers failed or differed from prod's by status (200 failed, 0 by status)"},
		{"by status", shadowSample{Same: 900, Differs: 100, ByStatus: 100}, "(0 failed, 100 by status)"},
		{"by body, 5 %", shadowSample{Same: 950, Differs: 50, ByBody: 50}, "5.00% of the gray build's 1000 mirrored answers differed from prod's by body (50; fields that differ between prod answers left out), allowed 1.00%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			h := recordRules(t, f)
			prom := promShadow(t, traffic{"svc", 1000, 0, 5000, 0.001}, func() *shadowSample { return &tc.copies })
			code, out, errOut := runCLI(t, nil, shadowArgs(f, prom)...)
			if code != exitRollback {
				t.Fatalf("exit %d:\n%s%s", code, out, errOut)
			}
			if got := h.describe(); got != "10/0 0/0" {
				t.Fatalf("the rules went through (shadow/canary) %s, want 10/0 0/0", got)
			}
			var res rolloutResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			if res.Outcome != "rolled-back" || res.Closed || res.Canary != 0 || len(res.Steps) != 0 || res.Shadow == nil ||
				res.Shadow.Verdict != "unhealthy" || !strings.Contains(res.Message, "stopped in the shadow phase") ||
				!strings.Contains(res.Message, tc.says) || res.Shadow.Ended.Before(res.Shadow.Started) {
				t.Fatalf("result %+v\n%s", res, errOut)
			}
		})
	}
}

// A healthy gray build goes on: after --shadow-for, shadowPercent back to
// 0, then the canary steps.
func TestShadowPhaseHealthyGoesOn(t *testing.T) {
	f := newFakeNacos(t)
	h := recordRules(t, f)
	prom := promShadow(t, traffic{"svc", 1000, 0.001, 5000, 0.001}, func() *shadowSample {
		return &shadowSample{Same: 990, Differs: 6, Failed: 4, ByStatus: 1, ByBody: 3, ByLatency: 2, Noise: 2}
	})
	code, out, errOut := runCLI(t, nil, shadowArgs(f, prom)...)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if got := h.describe(); got != "10/0 0/0 0/1 0/5 0/100" {
		t.Fatalf("the rules went through (shadow/canary) %s", got)
	}
	var res rolloutResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Shadow == nil || res.Shadow.Verdict != "healthy" || len(res.Shadow.Services) != 1 || res.Shadow.Services[0].Copies.Same != 990 {
		t.Fatalf("shadow report %+v", res.Shadow)
	}
	iOff, iStep := strings.Index(errOut, "shadow phase over: shadowPercent back to 0"), strings.Index(errOut, "step 1/3: canary 1% set")
	if iOff < 0 || iStep < iOff || !strings.Contains(errOut, "shadow phase: shadow 10% healthy after") {
		t.Fatalf("the log does not show the phase, then the steps:\n%s", errOut)
	}
}

// Without copies to judge (the callers do not count them), the phase
// waits and gives up after --max-wait, saying why; shadowPercent goes back
// to 0 and no step is written.
func TestShadowPhaseNeverAdvancesBlind(t *testing.T) {
	f := newFakeNacos(t)
	h := recordRules(t, f)
	prom := promShadow(t, traffic{"svc", 1000, 0, 5000, 0}, func() *shadowSample { return nil })
	code, out, errOut := runCLI(t, nil, shadowArgs(f, prom)...)
	if code != exitNoData {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if got := h.describe(); got != "10/0 0/0" {
		t.Fatalf("the rules went through (shadow/canary) %s", got)
	}
	for _, want := range []string{"waiting, not advancing blind", "the gray build answered 0 mirrored calls in the phase, at least 50 needed to judge",
		"Prometheus has no series of graylb_shadow_total for svc in the phase: do its callers install otelgraylb.ShadowObserver"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("the log lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "no verdict in the shadow phase") || !strings.Contains(out, "shadowPercent set back to 0") {
		t.Fatalf("output:\n%s", out)
	}
}

// A shadow phase is refused, nothing written, when the canary already
// sends users to gray; a share that is not a percentage is a usage error.
func TestShadowPhaseRefusals(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"canaryPercent": 5}`)
	prom := promShadow(t, traffic{"svc", 1000, 0, 5000, 0}, func() *shadowSample { return nil })
	code, out, errOut := runCLI(t, nil, shadowArgs(f, prom)...)
	if code != exitFailed || f.publishes != 0 || !strings.Contains(out, "the canary is at 5%, users already reach the gray build") {
		t.Fatalf("exit %d, %d writes:\n%s%s", code, f.publishes, out, errOut)
	}
	code, _, errOut = runCLI(t, nil, rolloutArgs(f, prom, "--shadow", "150")...)
	if code != exitUsage || !strings.Contains(errOut, "--shadow") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// A change by someone else during the phase stops the rollout and names
// the change; the rules stay as they left them.
func TestShadowPhaseStopsOnAChangeByOthers(t *testing.T) {
	f := newFakeNacos(t)
	var once sync.Once
	prom := promShadow(t, traffic{"svc", 1000, 0, 5000, 0}, func() *shadowSample {
		if strings.Contains(f.get("DEFAULT_GROUP", "graylb-rules.json"), "shadowPercent") {
			once.Do(func() { f.set("DEFAULT_GROUP", "graylb-rules.json", `{"shadowPercent": 50}`) })
		}
		return &shadowSample{Same: 1000}
	})
	code, out, errOut := runCLI(t, nil, shadowArgs(f, prom, "--shadow-for", "1s")...)
	if code != exitFailed || !strings.Contains(out, "during the shadow phase (shadow 10%)") || !strings.Contains(out, "shadowPercent: 10 → 50") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if r := storedRules(t, f); r.ShadowPercent != 50 {
		t.Fatalf("stored %+v, want the other writer's", r)
	}
}

func TestJudgeAnswers(t *testing.T) {
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01}
	prod := sample{Requests: 5000, Errors: 5}
	for _, tc := range []struct {
		name   string
		copies shadowSample
		want   verdict
	}{
		{"too few", shadowSample{Same: 60, Failed: 30}, verdictWait},
		{"NaN", shadowSample{Same: math.NaN()}, verdictWait},
		{"identical", shadowSample{Same: 1000}, verdictHealthy},
		{"noise within the allowance", shadowSample{Same: 990, Differs: 10, ByBody: 10}, verdictHealthy},
		{"5 % by body, 200 copies: evidence", shadowSample{Same: 190, Differs: 10, ByBody: 10}, verdictWorse},
		{"5 % by body, 1000 copies: beyond doubt", shadowSample{Same: 950, Differs: 50, ByBody: 50}, verdictUnhealthy},
		{"20 % failed", shadowSample{Same: 160, Failed: 40}, verdictUnhealthy},
		{"latency differences alone are the histogram's to judge", shadowSample{Same: 800, Differs: 200, ByLatency: 200}, verdictHealthy},
		{"more differences than copies", shadowSample{Same: 100, ByBody: 1e9}, verdictUnhealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, why := judgeAnswers(tc.copies, prod, th, 0.01); v != tc.want {
				t.Fatalf("judgeAnswers = %v (%s), want %v", v, why, tc.want)
			}
		})
	}
	// Checks in a row: a worse check is not yet a stop.
	j := newShadowJudge(thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, FailureLimit: 2}, 0.01)
	calls := kindSamples{gray: sample{Requests: 200}, prod: prod}
	worse := shadowSample{Same: 190, Differs: 10, ByBody: 10}
	if v, why := j.check(calls, worse); v != verdictWorse || !strings.Contains(why, "check 1 of 2 in a row") {
		t.Fatalf("first: %v %s", v, why)
	}
	if v, _ := j.check(calls, worse); v != verdictUnhealthy {
		t.Fatalf("second in a row: %v", v)
	}
}

// The lease says a rollout is in its shadow phase.
func TestLeaseInShadow(t *testing.T) {
	rec := newLeaseRecord("svc", []float64{1, 5}, time.Unix(0, 0))
	rec.Shadow = 10
	if s := rec.String(); !strings.Contains(s, "in its shadow phase (shadow 10%)") {
		t.Fatal(s)
	}
}

// A crash loop answers its copies as prod does between its crashes, so
// its answers alone find it healthy: its restarts (a new graylb.started on
// its address at two checks) stop it in the shadow phase, as in a step.
func TestShadowPhaseStopsACrashLoop(t *testing.T) {
	f := newFakeNacos(t)
	f.register("svc", startedHosts("p1", "g1"))
	h := recordRules(t, f)
	var mu sync.Mutex
	queries := 0
	prom := promShadow(t, traffic{"svc", 1000, 0.001, 5000, 0.001}, func() *shadowSample {
		mu.Lock()
		defer mu.Unlock()
		// A few queries make a check: the gray process starts anew twice,
		// several checks apart.
		if queries++; queries == 10 || queries == 20 {
			f.register("svc", startedHosts("p1", fmt.Sprintf("g%d", queries/10+1)))
		}
		return &shadowSample{Same: 990, Differs: 6, Failed: 4, ByStatus: 1, ByBody: 3, ByLatency: 2, Noise: 2}
	})
	code, out, errOut := runCLI(t, nil, shadowArgs(f, prom, "--shadow-for", "10s")...)
	if code != exitRollback {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if got := h.describe(); got != "10/0 0/0" {
		t.Fatalf("the rules went through (shadow/canary) %s, want 10/0 0/0", got)
	}
	if !strings.Contains(out, "stopped in the shadow phase") || !strings.Contains(out, "the gray build restarted 2 times since the rollout began") {
		t.Fatalf("the result does not name the restarts:\n%s%s", out, errOut)
	}
}
