package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const leaseDataID = "graylb-rules.json." + leaseName

// rolloutRunning is a rollout started in the background.
type rolloutRunning struct {
	cancel      context.CancelFunc
	done        chan int
	out, errOut *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRollout runs graylb with args in the background, for at most d.
func startRollout(t *testing.T, d time.Duration, args ...string) *rolloutRunning {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	r := &rolloutRunning{cancel: cancel, done: make(chan int, 1), out: newSyncBuffer(), errOut: newSyncBuffer()}
	go func() {
		r.done <- run(ctx, args, env{stdin: strings.NewReader(""), stdout: r.out, stderr: r.errOut,
			getenv: func(string) string { return "" }, http: &http.Client{}})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Error("a rollout did not stop within 20s of its cancellation")
		}
	})
	return r
}

// wait returns the rollout's exit code, failing the test after d.
func (r *rolloutRunning) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case code := <-r.done:
		r.done <- code // for the cleanup
		return code
	case <-time.After(d):
		t.Fatalf("the rollout did not end within %s:\n%s%s", d, r.out.String(), r.errOut.String())
		return 0
	}
}

// untilStep waits until the rollout says step n is set.
func (r *rolloutRunning) untilStep(t *testing.T, n string) {
	t.Helper()
	eventually(t, 20*time.Second, "the rollout sets step "+n, func() bool {
		select {
		case code := <-r.done:
			r.done <- code
			t.Fatalf("the rollout ended (exit %d) before step %s:\n%s%s", code, n, r.out.String(), r.errOut.String())
		default:
		}
		return strings.Contains(r.errOut.String(), "step "+n+" set") || strings.Contains(r.errOut.String(), "step "+n+"/")
	})
}

// A second rollout on the same rules refuses at once, saying who holds
// the lease; status shows the running rollout; the lease is gone when the
// first ends.
func TestRolloutOneAtATime(t *testing.T) {
	f := newFakeNacos(t)
	prom := fakeProm(t, func(string) string { return vector("gray", "1000", "prod", "1000") })
	first := startRollout(t, time.Minute, rolloutArgs(f, prom.URL, "--interval", "1h")...)
	first.untilStep(t, "1/3: canary 1%")
	// The lease names the step once the holder renews it after the step's
	// write (it logs the step first).
	eventually(t, 10*time.Second, "the lease names step 1", func() bool {
		return strings.Contains(f.get("DEFAULT_GROUP", "graylb-rules.json.rollout-lease"), `"step":1`)
	})

	start := time.Now()
	second := startRollout(t, 15*time.Second, rolloutArgs(f, prom.URL, "--interval", "1h")...)
	code := second.wait(t, 15*time.Second)
	out := second.out.String()
	if code != exitFailed || !strings.Contains(out, "another rollout is running") || !strings.Contains(out, "pid") ||
		!strings.Contains(out, "at step 1/3 (canary 1%)") {
		t.Fatalf("second rollout: exit %d after %s, want 1 at once naming the holder:\n%s%s", code, time.Since(start), out, second.errOut.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the second rollout took %s to refuse", d)
	}
	if r := storedRules(t, f); r.CanaryPercent != 1 {
		t.Fatalf("stored %+v: the second rollout wrote", r)
	}

	f.hosts = `{"hosts":[]}`
	code, sout, serr := runCLI(t, nil, "status", "svc", "--nacos", f.addr())
	if code != exitOK || !strings.Contains(sout, "rollout: RUNNING: the rollout of svc by") || !strings.Contains(sout, "step 1/3") {
		t.Fatalf("status: exit %d:\n%s%s", code, sout, serr)
	}

	first.cancel()
	if code := first.wait(t, 20*time.Second); code != exitSignal {
		t.Fatalf("first rollout: exit %d", code)
	}
	if got := f.get("DEFAULT_GROUP", leaseDataID); got != "" {
		t.Fatalf("the lease outlived its rollout: %s", got)
	}
}

// A lease whose holder died (not renewed) blocks others until it expires,
// then is taken over, saying whose it was.
func TestRolloutTakesOverAnExpiredLease(t *testing.T) {
	f := newFakeNacos(t)
	now := time.Now()
	dead := leaseRecord{Service: "svc", Host: "dead-host", PID: 4242, Token: "t0", Started: now.Add(-time.Hour),
		Steps: []float64{1, 5}, Step: 2, Canary: 5, Renewed: now, Expires: now.Add(2 * time.Second)}
	data, _ := json.Marshal(dead)
	f.set("DEFAULT_GROUP", leaseDataID, string(data))
	prom := promTraffic(t, 500, 0.002, 5000, 0.001)

	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL)...)
	if code != exitFailed || !strings.Contains(out, "dead-host pid 4242") {
		t.Fatalf("while the lease lives: exit %d:\n%s%s", code, out, errOut)
	}
	eventually(t, 10*time.Second, "the dead holder's lease expires", func() bool { return time.Now().After(dead.Expires) })
	code, sout, _ := runCLI(t, nil, "status", "svc", "--nacos", f.addr())
	if code != exitOK || !strings.Contains(sout, "rollout: none running (the rollout of svc by dead-host pid 4242") {
		t.Fatalf("status: exit %d:\n%s", code, sout)
	}
	code, out, errOut = runCLI(t, nil, rolloutArgs(f, prom.URL)...)
	if code != exitOK || !strings.Contains(errOut, "taking over the lease of the rollout of svc by dead-host pid 4242") ||
		!strings.Contains(errOut, "stopped renewing it") {
		t.Fatalf("after it expired: exit %d:\n%s%s", code, out, errOut)
	}
}

// A rollout whose lease someone else took stops, leaving the rules.
func TestRolloutStopsWhenItsLeaseIsTaken(t *testing.T) {
	f := newFakeNacos(t)
	prom := fakeProm(t, func(string) string { return vector("gray", "1000", "prod", "1000") })
	r := startRollout(t, time.Minute, rolloutArgs(f, prom.URL, "--interval", "1h", "--lease-ttl", "3s")...)
	r.untilStep(t, "1/3: canary 1%")
	other := leaseRecord{Service: "svc", Host: "other-host", PID: 7, Token: "t7", Started: time.Now(), Steps: []float64{1},
		Renewed: time.Now(), Expires: time.Now().Add(time.Minute)}
	data, _ := json.Marshal(other)
	f.set("DEFAULT_GROUP", leaseDataID, string(data))
	if code := r.wait(t, 20*time.Second); code != exitFailed || !strings.Contains(r.out.String(), "lost its lease") ||
		!strings.Contains(r.out.String(), "other-host pid 7") {
		t.Fatalf("exit %d:\n%s%s", code, r.out.String(), r.errOut.String())
	}
	if got := f.get("DEFAULT_GROUP", leaseDataID); !strings.Contains(got, "other-host") {
		t.Fatalf("the other's lease was removed: %q", got)
	}
}

// Redis: the lease is a key with a TTL; a second rollout refuses.
func TestRedisRolloutLease(t *testing.T) {
	addr := startRedis(t)
	prom := fakeProm(t, func(string) string { return vector("gray", "1000", "prod", "1000") })
	registry := newFakeNacos(t)
	registry.register("svc", prodAndGray)
	args := []string{"rollout", "--service", "svc", "--redis", addr, "--nacos", registry.addr(), "--prometheus", prom.URL,
		"--steps", "1,5", "--interval", "1h", "--poll", "20ms", "--window", "5s", "--min-requests", "50"}
	first := startRollout(t, time.Minute, args...)
	first.untilStep(t, "1/2: canary 1%")
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	key := "{graylb}:rules:" + leaseName
	if ttl := c.PTTL(context.Background(), key).Val(); ttl <= 0 {
		t.Fatalf("lease key %s: TTL %v, want one", key, ttl)
	}
	second := startRollout(t, 15*time.Second, args...)
	if code := second.wait(t, 15*time.Second); code != exitFailed || !strings.Contains(second.out.String(), "another rollout is running") {
		t.Fatalf("second: exit %d:\n%s%s", code, second.out.String(), second.errOut.String())
	}
	first.cancel()
	first.wait(t, 20*time.Second)
	if n := c.Exists(context.Background(), key).Val(); n != 0 {
		t.Fatal("the lease key outlived its rollout")
	}
}
