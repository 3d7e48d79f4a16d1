package main

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
)

// Any change by someone else during a step stops the rollout (exit 1):
// the rules stay as the other writer left them, and it says what changed.
// Before, only closed and enabled: false stopped it; graylb canary 0 was
// overwritten at the next step.
func TestRolloutStopsOnAnyChangeByOthers(t *testing.T) {
	const base = `{"grayUsers": ["qa"], "grayAddresses": ["10.0.0.7"]}`
	for _, tc := range []struct {
		name, other, says string
	}{
		{"canary 0 by hand", `{"grayUsers": ["qa"], "grayAddresses": ["10.0.0.7"], "canaryPercent": 0}`, "canaryPercent: 1 → 0"},
		{"a gray user added", `{"grayUsers": ["qa", "u9"], "grayAddresses": ["10.0.0.7"], "canaryPercent": 1}`, "grayUsers: +u9"},
		{"an address removed", `{"grayUsers": ["qa"], "canaryPercent": 1}`, "grayAddresses: -10.0.0.7"},
		{"a match rule", `{"grayUsers": ["qa"], "grayAddresses": ["10.0.0.7"], "canaryPercent": 1, "matches": [{"key": "x-lane", "exact": "a", "gray": true}]}`, "matches: 0 rule(s) → 1 rule(s)"},
		{"closed", `{"grayUsers": ["qa"], "grayAddresses": ["10.0.0.7"], "canaryPercent": 1, "closed": true}`, "closed: false → true"},
		{"a shadow share", `{"grayUsers": ["qa"], "grayAddresses": ["10.0.0.7"], "canaryPercent": 1, "shadowPercent": 5}`, "shadowPercent: 0 → 5"},
		{"routing off", `{"grayUsers": ["qa"], "grayAddresses": ["10.0.0.7"], "canaryPercent": 1, "enabled": false}`, "enabled: true → false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			f.set("DEFAULT_GROUP", "graylb-rules.json", base)
			var queries atomic.Int64
			prom := fakeProm(t, func(string) string {
				if queries.Add(1) == 6 { // during step 1, and healthy: step 2 would follow
					f.set("DEFAULT_GROUP", "graylb-rules.json", tc.other)
				}
				return vector("gray", "1000", "prod", "1000")
			})
			r := startRollout(t, 30*time.Second, rolloutArgs(f, prom.URL, "--interval", "300ms")...)
			code := r.wait(t, 30*time.Second)
			out := r.out.String()
			if code != exitFailed || !strings.Contains(out, "during step 1") || !strings.Contains(out, tc.says) {
				t.Fatalf("exit %d, want 1 saying %q:\n%s%s", code, tc.says, out, r.errOut.String())
			}
			if got := f.get("DEFAULT_GROUP", "graylb-rules.json"); got != tc.other {
				t.Fatalf("stored %s, want the other writer's rules left as they were: %s", got, tc.other)
			}
		})
	}
}

// A change by someone else between a step's judging and the next step's
// write stops the rollout too: the step's write is not made over it.
func TestRolloutDoesNotWriteOverAChange(t *testing.T) {
	f := newFakeNacos(t)
	var publishes atomic.Int64
	const other = `{"canaryPercent": 0}`
	f.beforePublish = func() {
		if publishes.Add(1) == 2 { // the write of step 2 (canary 5): someone set canary 0 just before
			f.set("DEFAULT_GROUP", "graylb-rules.json", other)
		}
	}
	prom := promTraffic(t, 500, 0.002, 5000, 0.001)
	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL)...)
	if code != exitFailed || !strings.Contains(out, "before step 2 (canary 5%) was written") || !strings.Contains(out, "canaryPercent: 1 → 0") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if got := f.get("DEFAULT_GROUP", "graylb-rules.json"); got != other {
		t.Fatalf("stored %s, want %s", got, other)
	}
}

// The three-key Redis layout cannot hold a shadow share: a write of one is
// refused, not dropped.
func TestThreeKeysRefuseAShadowShare(t *testing.T) {
	err := threeKeysCanHold(graylb.Rules{ShadowPercent: 10})
	if err == nil || !strings.Contains(err.Error(), "shadowPercent") {
		t.Fatalf("err = %v, want shadowPercent refused", err)
	}
}
