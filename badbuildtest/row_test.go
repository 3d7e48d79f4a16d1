package badbuildtest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a reporter that keeps what it is told.
type recorder struct{ errors, logs []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func healthy() build {
	for _, b := range builds {
		if !b.bad() {
			return b
		}
	}
	panic("no healthy build in the table")
}

func buildOf(fault string) build {
	for _, b := range builds {
		if b.fault == fault {
			return b
		}
	}
	panic("no build " + fault)
}

// The targets as row judges them: a known miss is reported in the row and
// is no error; any other miss is an error. A healthy build rolled back is
// an error whatever rolled it back (the tail test's stall no longer is
// excused); a contained build without a verdict is one (the judge counts
// the gray requests that fell back); a build rolled back on its restarts is
// judged from the check that saw its restartLimit-th restart.
func TestRow_TargetsAndKnownMisses(t *testing.T) {
	ok := func(exit int) result {
		return result{exit: exit, rep: report{Gray: counts{Sent: 100}, Unmarked: counts{Sent: 100}}}
	}
	tail := ok(3)
	tail.rollback = "8 of gray's 622 calls took longer than 332.93ms (prod's p99 215.29ms × 1.5 + 10ms)"
	errs := ok(3)
	errs.rollback = "gray error ratio 10.37% (26 of 251 calls)"
	failing := ok(3)
	failing.enough = 1
	failing.rep.Gray.Failed = 2
	prodOnGray := ok(3)
	prodOnGray.prodOnGray = 1
	// restarted: rolled back on its restarts after checks from the one that
	// saw the 2nd, enough checks with enough gray calls in the step.
	restarted := func(after, enough int) result {
		r := ok(3)
		r.checks, r.enough, r.onRestarts, r.afterRestarts = 17, enough, true, after
		r.rollback = onRestarts + " 2 times since the rollout began"
		return r
	}
	// crashedOnce: rolled back on its calls, after checks from the one
	// that saw its first restart (that one included), enough checks with
	// enough gray calls.
	crashedOnce := func(after, enough int) result {
		r := ok(3)
		r.checks, r.enough, r.afterFirstRestart = 10, enough, after
		r.rollback = "gray error ratio 12.33% (61 of 498 calls)"
		return r
	}
	knownReasons["test"] = "a reason of the test's"
	defer delete(knownReasons, "test")
	for _, tc := range []struct {
		name    string
		build   build
		results []result
		errors  int
		row     string // in the row
	}{
		{"healthy passed", healthy(), []result{ok(0), ok(0)}, 0, "| met |"},
		{"healthy rolled back by the tail", healthy(), []result{ok(0), tail}, 1, "**verdict missed: rolled back, not passed (8 of gray's 622 calls took longer than"},
		{"healthy rolled back by errors", healthy(), []result{ok(0), errs}, 1, "**verdict missed: rolled back, not passed (gray error ratio 10.37%"},
		{"healthy without a verdict", healthy(), []result{ok(4)}, 1, "**verdict missed: no verdict, not passed**"},
		{"slow rolled back in time", buildOf("slow"), []result{func() result { r := ok(3); r.enough = 2; return r }()}, 0, "| met |"},
		{"slow rolled back late", buildOf("slow"), []result{func() result { r := ok(3); r.enough = 3; return r }()}, 1, "**verdict missed: rolled back at the 3. check"},
		{"slow with 2 % failed", buildOf("slow"), []result{failing}, 1, "**failed missed: 2 of 100 (2.00 %) of QA"},
		{"errors contained without a verdict", buildOf("errors"), []result{ok(4)}, 1, "**verdict missed: no verdict, not rolled back**"},
		{"a crash loop without a verdict", buildOf("crash"), []result{ok(0)}, 1, "**verdict missed: passed, not rolled back**"},
		{"a crash loop rolled back at its 2nd restart", buildOf("crash"), []result{restarted(1, 7)}, 0,
			"| 17 (7); rolled back on its restarts (1 of 1 runs), 1 check(s) from the one that saw its restart number 2 | met |"},
		{"a crash loop rolled back later", buildOf("crash"), []result{restarted(3, 7)}, 1, "**verdict missed: rolled back at the 3. check after its 2. restart**"},
		// Rolled back on its calls after its first crash, before a second:
		// judged from the check that saw its first restart.
		{"a crash loop rolled back on its calls after its first crash", buildOf("crash"), []result{crashedOnce(3, 9)}, 0, "| met |"},
		{"a crash loop rolled back late after its first crash", buildOf("crash"), []result{crashedOnce(4, 9)}, 1, "**verdict missed: rolled back at the 3. check after the one that saw its first restart**"},
		{"errors, a prod request on gray", buildOf("errors"), []result{prodOnGray}, 1, "**prod on gray missed: 1 prod requests"},
		{"a known miss", build{fault: "x", what: "a build of the test's", known: map[target]string{targetVerdict: "test"}}, []result{ok(4)}, 0,
			"verdict missed: no verdict, not rolled back (known: test)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			used := map[string]bool{}
			got := row(&r, planned{tc.build, 1, len(tc.results)}, tc.results, used)
			if len(r.errors) != tc.errors {
				t.Errorf("%d errors, want %d: %q", len(r.errors), tc.errors, r.errors)
			}
			if !strings.Contains(got, tc.row) {
				t.Errorf("row %s\nwant it to contain %q", got, tc.row)
			}
			for k := range used {
				if knownReasons[k] == "" {
					t.Errorf("known miss %q has no reason", k)
				}
			}
		})
	}
}

// Every known miss a build lists has its reason.
func TestBuilds_KnownMissesHaveReasons(t *testing.T) {
	for _, b := range builds {
		for tg, k := range b.known {
			if knownReasons[k] == "" {
				t.Errorf("%s: target %s: known miss %q has no reason", b.what, tg, k)
			}
		}
	}
}

// checks reads graylb rollout's progress lines as the command prints
// them (lines of real runs).
func TestChecks_ReadsTheRolloutsProgress(t *testing.T) {
	const slow = `23:26:00 rollout of svc: steps [10 50]% every 10s, rules in nacos config ..., lease ...
23:26:00 step 1/2: canary 10% set
23:26:01 step 1/2: canary 10%: 1s of 10s: wait: gray completed 0 calls in the step, at least 100 needed to judge
23:26:02 step 1/2: canary 10%: 2s of 10s: worse: gray's calls are slower than prod's × 1.5 + 10ms (p = < 0.000001) (check 1 of 2 in a row before a rollback)
23:26:03 gray is worse than prod: gray's calls are slower than prod's × 1.5 + 10ms: a gray call outlasts one of prod's so stretched 79% of the time (p = < 0.000001; median 71.11ms vs prod's 23.44ms); rolling back (closed: true)
`
	const twoSteps = `23:21:15 step 1/2: canary 10% set
23:21:16 step 1/2: canary 10%: 1s of 10s: wait: gray completed 0 calls in the step, at least 100 needed to judge
23:21:17 step 1/2: canary 10%: 2s of 10s: healthy: no evidence gray is worse: error ratio 0.00% over 110 calls vs prod's 0.00% (taken as 0: prod completed only 90 calls), latency not compared (no histogram for both kinds)
23:21:25 step 1/2: canary 10% healthy after 10s: no evidence gray is worse: error ratio 1.10% over 455 calls vs prod's 0.00% (550 calls), median 27.15ms vs prod's 30.75ms, p99 91.27ms vs 93.42ms
23:21:26 step 2/2: canary 50% set
23:21:27 step 2/2: canary 50%: 1s of 10s: wait: gray completed 0 calls in the step, at least 100 needed to judge
23:21:36 step 2/2: canary 50%: waiting, not advancing blind: gray completed 0 calls in the step, at least 100 needed to judge (10s left of --max-wait)
23:21:37 step 2/2: canary 50%: waiting, not advancing blind: gray completed 0 calls in the step, at least 100 needed to judge (9s left of --max-wait)
`
	// As the rollout prints them today: each step's write names the
	// services it judges, each check the service (a pattern without either
	// counted none of a step's checks but its last, and never began a
	// step's count anew).
	const contained = `00:32:16 rollout of user-service: steps [10 20]% every 6s, rules in redis document {graylb}:rules @ 127.0.0.1:40455, metrics from http://127.0.0.1:46189, lease redis key {graylb}:rules:rollout-lease @ 127.0.0.1:40455
00:32:16 step 1/2: canary 10% set; judging user-service
00:32:17 step 1/2: canary 10%: 1s of 6s: user-service: wait: gray completed 19 calls in the step, at least 100 needed to judge; the callers ejected 1 gray instance (or paused it): 12 gray requests fell back to prod in the step, counted as failed gray calls
00:32:18 step 1/2: canary 10%: 2s of 6s: user-service: wait: gray completed 49 calls in the step, at least 100 needed to judge; the callers ejected 1 gray instance (or paused it): 42 gray requests fell back to prod in the step, counted as failed gray calls
00:32:19 step 1/2: canary 10%: 3s of 6s: user-service: wait: gray completed 75 calls in the step, at least 100 needed to judge; the callers ejected 1 gray instance (or paused it): 68 gray requests fell back to prod in the step, counted as failed gray calls
00:32:20 gray is worse than prod: user-service: gray error ratio 100.00% (102 of 102 calls) vs prod's 0.00% (888 calls), allowed 1.00 points more (p = < 0.000001); the callers ejected 1 gray instance (or paused it): 95 gray requests fell back to prod in the step, counted as failed gray calls; rolling back (closed: true)
`
	const crash = `00:39:07 step 1/2: canary 10% set; judging svc
00:39:08 step 1/2: canary 10%: 1s of 10s: svc: healthy: no evidence gray is worse: error ratio 0.20% over 500 calls vs prod's 0.10% (5000 calls)
00:39:08 step 1/2: svc: gray instance 127.0.0.1:9002 restarted (graylb.started g1, then g2); restarts since the rollout began: gray 1, prod 0
00:39:09 step 1/2: canary 10%: 2s of 10s: svc: healthy: no evidence gray is worse: error ratio 0.20% over 500 calls vs prod's 0.10% (5000 calls)
00:39:18 step 1/2: canary 10% healthy after 11s: svc: healthy: no evidence gray is worse: error ratio 0.20% over 500 calls vs prod's 0.10% (5000 calls)
00:39:18 step 2/2: canary 50% set; judging svc
00:39:19 step 2/2: canary 50%: 1s of 10s: svc: healthy: no evidence gray is worse: error ratio 0.20% over 500 calls vs prod's 0.10% (5000 calls)
00:39:20 step 2/2: svc: gray instance 127.0.0.1:9002 restarted (graylb.started g2, then g3); restarts since the rollout began: gray 2, prod 0
00:39:20 gray is worse than prod: svc: the gray build restarted 2 times since the rollout began (127.0.0.1:9002: 2; registered again on its address with a new graylb.started), prod's 1 instances none (--restart-limit 2); no evidence gray is worse: error ratio 0.20% over 500 calls vs prod's 0.10% (5000 calls); rolling back (closed: true)
`
	for _, tc := range []struct {
		name          string
		stderr        string
		code          int
		all, enough   int
		afterRestarts int
	}{
		{"rolled back", slow, 3, 3, 2, 0},
		{"no verdict in the second step", twoSteps, 4, 7, 0, 0},
		{"contained, rolled back on its fall-backs", contained, 3, 4, 1, 0},
		{"a crash loop rolled back on its restarts", crash, 3, 5, 2, 1},
	} {
		if all, enough := checks(tc.stderr, tc.code); all != tc.all || enough != tc.enough {
			t.Errorf("%s: %d checks, %d with enough calls; want %d, %d", tc.name, all, enough, tc.all, tc.enough)
		}
		if n := checksAfterRestarts(tc.stderr, restartLimit); n != tc.afterRestarts {
			t.Errorf("%s: %d checks from the one that saw the %d. restart, want %d", tc.name, n, restartLimit, tc.afterRestarts)
		}
	}
	if m := rolledBack.FindStringSubmatch(crash); m == nil || !strings.Contains(m[1], onRestarts) {
		t.Errorf("the rollback's reason on restarts: %q", m)
	}
	if m := rolledBack.FindStringSubmatch(slow); m == nil || !strings.HasPrefix(m[1], "gray's calls are slower") {
		t.Errorf("the rollback's reason: %q", m)
	}
}
