package adaptertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callObserver: the LoadBalancer's CallObserver (graylb.WithCallObserver)
// is told of every call the client makes, under every policy, once each,
// with the instance that served it and that instance's kind (a gray call
// that fell back to prod is prod); a call answered with a server error or
// past its caller's deadline is told as failed; a cancelled one is not
// told.
func callObserver(t *testing.T, d *Driver) {
	for _, p := range []struct {
		name   string
		policy policy.Policy
	}{
		{"RoundRobin", policy.RoundRobin()},
		{"StrictRoundRobin", policy.StrictRoundRobin()},
		{"WeightedRoundRobin", policy.WeightedRoundRobin()},
		{"Random", policy.Random()},
		{"P2C", policy.P2C()},
	} {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, d)
			var obs observer
			var fail, hang atomic.Bool
			lb, slb := e.lb(graylb.WithPolicy(p.policy), graylb.WithCallObserver(obs.observe)), e.lb()
			ins := []*instance{
				e.serve(slb, "svc", "prod-1", nil, ServerOptions{}),
				e.serve(slb, "svc", "prod-2", nil, ServerOptions{}),
				e.serve(slb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{}),
				e.serve(slb, "solo", "prod-solo", nil, ServerOptions{}),
				e.serve(slb, "failing", "gray-failing", map[string]string{"gray": "true"}, ServerOptions{Fail: &fail}),
				e.serve(slb, "hanging", "gray-hanging", map[string]string{"gray": "true"}, ServerOptions{Hang: &hang}),
			}
			svc, solo, failing, hanging := e.dial(lb, "svc"), e.dial(lb, "solo"), e.dial(lb, "failing"), e.dial(lb, "hanging")
			ready(t, svc, nil, "prod-1", "prod-2")
			ready(t, svc, grayKeys, "gray-1")
			ready(t, solo, grayKeys, "prod-solo")
			ready(t, failing, grayKeys, "gray-failing")
			ready(t, hanging, grayKeys, "gray-hanging")
			fail.Store(true)
			hang.Store(true)

			obs.reset()
			want := map[string]int{}
			for i := 0; i < 6; i++ {
				for _, c := range []struct {
					c    Client
					keys map[string]string
				}{{svc, grayKeys}, {svc, nil}, {solo, grayKeys}} {
					a := answer(t, c.c, c.keys)
					want[addrOf(ins, a.Instance)+" "+kindOf(a.Instance)+" ok"]++
				}
			}
			obs.wait(t, 18)
			assert.Equal(t, want, obs.seen(), "%s under %s: the calls answered", d.Name, p.name)

			obs.reset()
			for i := 0; i < 2; i++ {
				a, err := call(failing, grayKeys)
				require.Error(t, err, "%s: a failing instance answered %+v", d.Name, a)
			}
			obs.wait(t, 2)
			assert.Equal(t, map[string]int{addrOf(ins, "gray-failing") + " gray error": 2}, obs.seen(),
				"%s under %s: the calls answered with a server error", d.Name, p.name)

			obs.reset()
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			a, err := hanging(ctx, grayKeys)
			cancel()
			require.Error(t, err, "%s: a hanging instance answered %+v", d.Name, a)
			obs.wait(t, 1)
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			a, err = hanging(ctx, grayKeys)
			require.Error(t, err, "%s: a hanging instance answered %+v", d.Name, a)
			time.Sleep(50 * time.Millisecond) // a cancelled call wrongly told would be by now
			assert.Equal(t, map[string]int{addrOf(ins, "gray-hanging") + " gray error": 1}, obs.seen(),
				"%s under %s: a call past its deadline is told as failed, a cancelled one is not told", d.Name, p.name)
		})
	}
}

// ejection: with outlier detection (graylb.WithOutlierDetection), an
// instance that answers server errors is ejected after a few of them in a
// row: its kind's calls go to the rest of that kind, a gray call whose
// every gray instance is ejected falls back to prod, and prod calls never
// reach gray nor fail meanwhile.
func ejection(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	const failures = 3
	var mu sync.Mutex
	var ejected []string
	lb, slb := e.lb(graylb.WithOutlierDetection(graylb.OutlierConfig{
		ConsecutiveFailures: failures, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		OnEjection: func(ej graylb.Ejection) {
			if ej.For > 0 {
				mu.Lock()
				ejected = append(ejected, ej.Addr)
				mu.Unlock()
			}
		},
	})), e.lb()
	var grayFails, prodFails atomic.Bool
	p1 := e.serve(slb, "svc", "prod-1", nil, ServerOptions{Fail: &prodFails})
	e.serve(slb, "svc", "prod-2", nil, ServerOptions{})
	g := e.serve(slb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{Fail: &grayFails})
	svc := e.dial(lb, "svc")
	ready(t, svc, grayKeys, "gray-1")
	ready(t, svc, nil, "prod-1", "prod-2")

	// until answers c with keys until an answer satisfies done, at most
	// 40 times; it returns how many failed.
	until := func(what string, keys map[string]string, done func(Answer) bool) int {
		t.Helper()
		failed := 0
		for i := 0; i < 40; i++ {
			a, err := call(svc, keys)
			if err != nil {
				failed++
				continue
			}
			if keys == nil {
				require.False(t, isGray(a.Instance), "%s: a prod call reached %s", d.Name, a.Instance)
			}
			if done(a) {
				return failed
			}
		}
		t.Fatalf("%s: %s: not within 40 calls", d.Name, what)
		return 0
	}
	grayFails.Store(true)
	n := until("a failing gray instance is ejected", grayKeys, func(a Answer) bool { return !isGray(a.Instance) })
	t.Logf("%s: %d gray calls failed before the gray instance was ejected", d.Name, n)
	assert.GreaterOrEqual(t, n, 1, "%s: the failing gray instance was never called", d.Name)
	assert.LessOrEqual(t, n, 2*failures, "%s: the gray instance was ejected late", d.Name)
	for i := 0; i < 6; i++ {
		a := answer(t, svc, grayKeys)
		assert.False(t, isGray(a.Instance), "%s: a gray call reached the ejected gray instance", d.Name)
		a = answer(t, svc, nil)
		assert.False(t, isGray(a.Instance), "%s: a prod call reached %s", d.Name, a.Instance)
	}

	prodFails.Store(true)
	n = 0
	for streak, i := 0, 0; streak < 6; i++ {
		require.Less(t, i, 40, "%s: a failing prod instance is not ejected within 40 calls", d.Name)
		a, err := call(svc, nil)
		switch {
		case err != nil:
			n, streak = n+1, 0
		case isGray(a.Instance):
			t.Fatalf("%s: a prod call reached %s", d.Name, a.Instance)
		default:
			streak++
		}
	}
	for i := 0; i < 6; i++ {
		a := answer(t, svc, nil)
		assert.Equal(t, "prod-2", a.Instance, "%s: a prod call after prod-1 was ejected", d.Name)
	}
	t.Logf("%s: %d prod calls failed before prod-1 was ejected", d.Name, n)
	assert.LessOrEqual(t, n, 2*failures, "%s: prod-1 was ejected late", d.Name)
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, ejected, g.inst.Addr(), "%s: OnEjection was told of the gray instance", d.Name)
	assert.Contains(t, ejected, p1.inst.Addr(), "%s: OnEjection was told of prod-1", d.Name)
}

// abruptDeath: an instance that dies abruptly (its listener closed, its
// connections reset, the registry still listing it) serves nobody: every
// idempotent call made after the death succeeds on another instance of its
// kind, and prod calls never reach gray.
func abruptDeath(t *testing.T, d *Driver) {
	if why, ok := d.Lacks[RetryOnDeath]; ok {
		t.Skipf("%s lacks %s: %s", d.Name, RetryOnDeath, why)
	}
	e := newEnv(t, d)
	lb, slb := e.lb(), e.lb()
	p1 := e.serve(slb, "svc", "prod-1", nil, ServerOptions{})
	e.serve(slb, "svc", "prod-2", nil, ServerOptions{})
	g1 := e.serve(slb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	e.serve(slb, "svc", "gray-2", map[string]string{"gray": "true"}, ServerOptions{})
	svc := e.dial(lb, "svc")
	ready(t, svc, grayKeys, "gray-1", "gray-2")
	ready(t, svc, nil, "prod-1", "prod-2")
	g1.l.Kill()
	p1.l.Kill()
	for i := 0; i < 20; i++ {
		a, err := call(svc, grayKeys)
		if assert.NoError(t, err, "%s: gray call %d after the death", d.Name, i) {
			assert.Equal(t, "gray-2", a.Instance, "%s: gray call %d after the death", d.Name, i)
		}
		a, err = call(svc, nil)
		if assert.NoError(t, err, "%s: prod call %d after the death", d.Name, i) {
			assert.Equal(t, "prod-2", a.Instance, "%s: prod call %d after the death", d.Name, i)
		}
	}
}

// allocations: a call through the adapter's client allocates at most
// Driver.MaxAllocs more than the same call to the same server through the
// transport without graylb (Driver.Direct). Under the race detector the
// counts vary (sync.Pool drops items at random): it skips, and make test
// runs it without (scripts/alloctests.sh).
func allocations(t *testing.T, d *Driver) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector; make test-allocs measures them without it")
	}
	if d.Direct == nil {
		t.Skipf("%s declares no allocation bound (Driver.Direct is nil)", d.Name)
	}
	e := newEnv(t, d)
	lb := e.lb()
	e.serve(lb, "svc", "prod-1", nil, ServerOptions{})
	g := e.serve(lb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	svc, direct := e.dial(lb, "svc"), d.Direct(t, g.inst.Addr())
	ready(t, svc, grayKeys, "gray-1")
	ready(t, direct, grayKeys, "gray-1")
	var failed atomic.Value
	run := func(c Client) func() {
		return func() {
			a, err := call(c, grayKeys)
			if err == nil && a.Instance != "gray-1" {
				err = fmt.Errorf("answered by %s", a.Instance)
			}
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		}
	}
	for i := 0; i < 20; i++ { // connections, pools, caches
		run(svc)()
		run(direct)()
	}
	via := testing.AllocsPerRun(200, run(svc))
	base := testing.AllocsPerRun(200, run(direct))
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("%s: a call failed: %v", d.Name, err)
	}
	t.Logf("%s: %.1f allocations per call, %.1f without graylb: %.1f added (bound %.0f)", d.Name, via, base, via-base, d.MaxAllocs)
	assert.LessOrEqual(t, via-base, d.MaxAllocs, "%s: the allocations graylb adds to a call", d.Name)
}

// callEnds: a call ends when its caller is done with it, not when its
// answer begins (an HTTP response's headers, a gRPC stream's first
// message). An answer whose rest
//   - comes late (RestLate) is told ok, with a duration that includes the
//     rest;
//   - never comes before its caller's deadline (RestStall) is told failed,
//     and its instance is ejected, as one that never answered;
//   - breaks off (RestBreak: a reset connection, Unavailable) is told
//     failed, and its instance is ejected;
//   - its caller abandons after the first part (closes the body, cancels
//     the stream; Capability Abandon) is never told failed, and its
//     instance is not ejected.
//
// Each call leaves the in-flight count once it ended.
func callEnds(t *testing.T, d *Driver) {
	if d.Stream == nil {
		t.Skipf("%s has no streamed calls (Driver.Stream is nil)", d.Name)
	}
	const failures = 3
	for _, c := range []struct {
		name     string
		rest     Rest
		whole    bool
		deadline time.Duration
		failed   bool // told failed, and the instance ejected
	}{
		{"late", RestLate, true, callTimeout, false},
		{"stall", RestStall, true, 300 * time.Millisecond, true},
		{"break", RestBreak, true, callTimeout, true},
		{"abandoned", RestStall, false, callTimeout, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := d.Lacks[Abandon]; ok && !c.whole {
				t.Skipf("%s lacks %s: %s", d.Name, Abandon, why)
			}
			e := newEnv(t, d)
			var obs observer
			var rest atomic.Uint32
			lb, slb := e.lb(graylb.WithCallObserver(obs.observe), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: failures})), e.lb()
			service := "svc-" + c.name // a framework's client breaker is per service
			in := e.serve(slb, service, "prod-1", nil, ServerOptions{Rest: &rest})
			stream := d.Stream(t, e.reg, lb, service)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				_, err := stream(ctx, nil, true)
				cancel()
				if err == nil {
					break
				}
				require.True(t, time.Now().Before(deadline), "%s: streamed calls failed for 10s; the last: %v", d.Name, err)
			}
			stats := statsOf(t, lb, service, "false")
			obs.wait(t, 1)
			obs.reset()

			rest.Store(uint32(c.rest))
			const calls = 2 * failures
			for i := 0; i < calls || c.failed && (obs.count() < calls || !stats.Ejected()); i++ {
				require.Less(t, i, 40, "%s: an answer whose rest is %s: 40 calls, %d of them told to the CallObserver, and its instance was not ejected", d.Name, c.name, obs.count())
				ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
				a, err := stream(ctx, nil, c.whole)
				cancel()
				if c.failed {
					require.Error(t, err, "%s: an answer whose rest is %s: the call succeeded with %+v", d.Name, c.name, a)
					continue
				}
				require.NoError(t, err, "%s: an answer whose rest is %s", d.Name, c.name)
				require.Equal(t, "prod-1", a.Instance)
			}
			waitUntil(t, func() bool { return stats.InFlight() == 0 }, "%s: an answer whose rest is %s: %d calls still in flight", d.Name, c.name, stats.InFlight())
			seen := obs.seen()
			switch {
			case c.failed:
				assert.Equal(t, []string{in.inst.Addr() + " prod error"}, keysOf(seen), "%s: an answer whose rest is %s: the CallObserver was told %v", d.Name, c.name, seen)
				assert.True(t, stats.Ejected(), "%s: an answer whose rest is %s: its instance was not ejected", d.Name, c.name)
			case c.whole:
				obs.wait(t, calls)
				assert.Equal(t, map[string]int{in.inst.Addr() + " prod ok": calls}, obs.seen(), "%s: an answer whose rest is %s", d.Name, c.name)
				for _, took := range obs.durations() {
					assert.GreaterOrEqual(t, took, RestDelay, "%s: an answer whose rest came %v late was told with a duration without it", d.Name, RestDelay)
				}
				assert.False(t, stats.Ejected(), "%s: an answer whose rest is %s: its instance was ejected", d.Name, c.name)
			default:
				assert.NotContains(t, seen, in.inst.Addr()+" prod error", "%s: an answer abandoned after its first part was told failed", d.Name)
				assert.False(t, stats.Ejected(), "%s: answers abandoned after their first part ejected their instance", d.Name)
			}
		})
	}
}
