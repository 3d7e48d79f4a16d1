package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
)

// TestIntegration_JudgeRealMetrics runs rollouts at the judge's defaults
// against callers' real otelgraylb metrics scraped by a real Prometheus,
// with canaries of about 100 gray calls a step, for three gray builds: one
// identical to prod (it must pass), one answering 20 % errors and one
// whose every call takes three times as long (each must roll back within
// two polls of having enough calls). GRAYLB_JUDGE_ROLLOUTS rollouts each
// (default 2; make test-reliability runs 20 and writes the figures to
// GRAYLB_RELIABILITY_OUT).
func TestIntegration_JudgeRealMetrics(t *testing.T) {
	integration(t)
	n := 2
	if v := os.Getenv("GRAYLB_JUDGE_ROLLOUTS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	var rows []string
	for _, tc := range []struct {
		name     string
		errEvery int64
		slower   float64
		want     int
	}{
		{"identical to prod", 0, 1, exitOK},
		{"20 % errors", 5, 1, exitRollback},
		{"three times slower", 0, 3, exitRollback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t)
			key := "{graylb}:rules"
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			rdb.Set(context.Background(), key, `{}`, 0)
			reg, registry := graylb.NewRegistry(), newFakeNacos(t)
			for i, b := range []http.Handler{timedBackend(0, 1), timedBackend(0, 1), timedBackend(tc.errEvery, tc.slower)} {
				srv := httptest.NewServer(b)
				t.Cleanup(srv.Close)
				host, port := hostPortOf(t, srv.URL)
				md := map[string]string{}
				if i == 2 {
					md["gray"] = "true"
				}
				in := graylb.NewInstance(releasedService, host, port, md)
				if err := reg.Register(in); err != nil {
					t.Fatal(err)
				}
				registry.mirror(in)
			}
			src, err := redisrules.New(rdb, redisrules.WithDocument(key), redisrules.WithPollInterval(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			c := startCallerWith(t, reg, src, 8)
			prom := startPrometheus(t, c.metrics)
			passed, back, late := 0, 0, 0
			for i := 0; i < n; i++ {
				rdb.Set(context.Background(), key, `{}`, 0)
				eventually(t, 10*time.Second, "the caller follows the reset rules", func() bool {
					r := c.lb.RulesState().Rules
					return !r.Closed && r.CanaryPercent == 0
				})
				code, out, errOut := rolloutRun(t, "rollout", "--service", releasedService, "--prometheus", prom, "--redis", addr, "--nacos", registry.addr(),
					"--steps", "10,20", "--interval", "6s", "--poll", "1s", "--max-wait", "30s")
				switch code {
				case exitOK:
					passed++
				case exitRollback:
					back++
					// Polls after gray first had --min-requests calls in the
					// step that was rolled back: the lines of the last step.
					last := errOut[strings.LastIndex(errOut, "set\n")+1:]
					if k := strings.Count(last, ": worse: ") + strings.Count(last, ": healthy: "); k > 1 {
						late++
					}
				default:
					t.Fatalf("rollout %d exit %d:\n%s%s", i+1, code, out, errOut)
				}
			}
			row := fmt.Sprintf("| %s | %d | %d | %d | %d |", tc.name, n, passed, back, late)
			rows = append(rows, row)
			t.Log(row)
			if tc.want == exitOK && passed < n-n/20 {
				t.Errorf("a build identical to prod passed %d of %d rollouts; at least %d wanted", passed, n, n-n/20)
			}
			if tc.want == exitRollback && (back != n || late > 0) {
				t.Errorf("a bad build rolled back in %d of %d rollouts (%d later than two polls after enough calls); all, within two polls, wanted", back, n, late)
			}
		})
	}
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		table := "| gray build | rollouts | passed | rolled back | rolled back later than two polls after enough calls |\n|---|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, "judge.md"), []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A broken gray build contained by the callers' outlier detection: every
// gray call fails, the caller ejects the gray instance within a few calls
// and its gray requests fall back to prod. The judge reads the fall-backs
// from the caller's picks metric (otelgraylb's Observer, scraped by a real
// Prometheus) and rolls the build back within the first step, saying the
// caller ejected it; before, gray completed a handful of calls in each
// step and the rollout ended without a verdict (exit 4). A healthy build
// under the same caller passes.
func TestIntegration_ContainedBuildIsRolledBack(t *testing.T) {
	integration(t)
	for _, tc := range []struct {
		name     string
		errEvery int64
		want     int
	}{
		{"every gray call fails", 1, exitRollback},
		{"identical to prod", 0, exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t)
			key := "{graylb}:rules"
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			rdb.Set(context.Background(), key, `{}`, 0)
			reg, registry := graylb.NewRegistry(), newFakeNacos(t)
			var all []graylb.Instance
			for i, b := range []http.Handler{timedBackend(0, 1), timedBackend(0, 1), timedBackend(tc.errEvery, 1)} {
				srv := httptest.NewServer(b)
				t.Cleanup(srv.Close)
				host, port := hostPortOf(t, srv.URL)
				md := map[string]string{}
				if i == 2 {
					md["gray"] = "true"
				}
				in := graylb.NewInstance(releasedService, host, port, md)
				if err := reg.Register(in); err != nil {
					t.Fatal(err)
				}
				all = append(all, in)
			}
			registry.mirror(all...)
			src, err := redisrules.New(rdb, redisrules.WithDocument(key), redisrules.WithPollInterval(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			c := startCallerOf(t, reg, src, 8, true)
			prom := startPrometheus(t, c.metrics)
			code, out, errOut := rolloutRun(t, "rollout", "--service", releasedService, "--prometheus", prom, "--redis", addr, "--nacos", registry.addr(),
				"--steps", "10,20", "--interval", "6s", "--poll", "1s", "--max-wait", "30s")
			if code != tc.want {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tc.want, out, errOut)
			}
			if tc.want == exitRollback {
				if strings.Contains(errOut, "canary 20% set") || !strings.Contains(out, "the callers ejected 1 gray instance") {
					t.Fatalf("not rolled back within the first step on the caller's fall-backs:\n%s%s", out, errOut)
				}
				// Polls after gray first had --min-requests calls: at most two.
				if k := strings.Count(errOut, ": worse: ") + strings.Count(errOut, ": healthy: "); k > 1 {
					t.Errorf("rolled back %d checks after gray had enough calls, at most 2 wanted:\n%s", k+1, errOut)
				}
			}
		})
	}
}

// timedBackend answers after 15 ms plus an exponential time of mean 15 ms,
// times slower, and 500 to every errEvery-th request (0: never).
func timedBackend(errEvery int64, slower float64) http.Handler {
	var calls atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		time.Sleep(time.Duration(slower * (15 + rand.ExpFloat64()*15) * float64(time.Millisecond))) // must sleep: the latency is what the judge compares
		if errEvery > 0 && n%errEvery == 0 {
			http.Error(w, "gray build failure", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	})
}

func hostPortOf(t *testing.T, url string) (string, int) {
	b := &backend{srv: &httptest.Server{URL: url}}
	return b.hostPort(t)
}
