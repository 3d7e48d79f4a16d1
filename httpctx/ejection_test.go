package httpctx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/require"
)

// manualClock readmits when the test says so.
type manualClock struct {
	mu     sync.Mutex
	timers []func()
}

func (c *manualClock) Now() time.Time { return time.Now() }

func (c *manualClock) AfterFunc(_ time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, f)
	return func() bool { return false }
}

// fire runs every pending timer.
func (c *manualClock) fire() {
	c.mu.Lock()
	fs := c.timers
	c.timers = nil
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// TestTransportEjectsA500Backend: of three prod backends one answers 500.
// Outlier detection ejects it after 5 failures; then every request
// succeeds. Once it heals and is readmitted it gets its share again.
func TestTransportEjectsA500Backend(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	var hits [3]atomic.Int64
	reg := graylb.NewRegistry()
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			if i == 2 && broken.Load() {
				http.Error(w, "broken", http.StatusInternalServerError)
				return
			}
			io.WriteString(w, "ok")
		}))
		defer srv.Close()
		register(t, reg, "svc", srv, nil)
	}
	clk := &manualClock{}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithOutlierDetection(graylb.OutlierConfig{Clock: clk}))
	require.NoError(t, err)
	defer lb.Close()
	changes := make(chan string, 8)
	defer adapter.For(lb).OnEjectionChange(func(s string) { changes <- s })()
	client := &http.Client{Transport: NewTransport(lb)}

	do := func(n int) (ok int) {
		for range n {
			resp, err := client.Get("http://svc/")
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok++
			}
		}
		return ok
	}
	const n = 1000
	ok := do(n)
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("the 500 backend was not ejected")
	}
	rate := float64(ok) / n
	require.GreaterOrEqual(t, rate, 0.99)
	before := hits[2].Load()
	ok2 := do(300)
	require.Equal(t, 300, ok2, "after the ejection every request succeeds")
	require.Equal(t, before, hits[2].Load(), "the ejected backend gets nothing")

	broken.Store(false)
	clk.fire()
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("no readmission")
	}
	ok3 := do(300)
	healed := hits[2].Load() - before
	require.Equal(t, 300, ok3)
	require.InDelta(t, 100, healed, 30, "the healed backend gets its share again")
	reliabilityFragment(t, "outlier-ejection", fmt.Sprintf(
		"| outlier ejection, 3 prod backends, one answers 500 (HTTP Transport, defaults: 5 consecutive failures) | %d requests: %.1f %% succeeded (%d failed, all before the ejection) | next 300: 100 %%, 0 to the ejected one | healed and readmitted: %d of the next 300 (a third is 100) |\n",
		n, 100*rate, n-ok, healed))
}

// TestTransportReportsConnectionFailures: a dead instance counts as
// failed even when the retry succeeds, and is ejected.
func TestTransportReportsConnectionFailures(t *testing.T) {
	reg := graylb.NewRegistry()
	srv := named("alive")
	defer srv.Close()
	register(t, reg, "svc", srv, nil)
	host, port := deadAddr(t)
	require.NoError(t, reg.Register(graylb.NewInstance("svc", host, port, nil)))
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()),
		graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 2, Clock: &manualClock{}}))
	require.NoError(t, err)
	defer lb.Close()
	changes := make(chan string, 8)
	defer adapter.For(lb).OnEjectionChange(func(s string) { changes <- s })()
	client := &http.Client{Transport: NewTransport(lb, WithFailureStatus(func(code int) bool { return code == 503 }))}
	for range 10 {
		resp, err := client.Get("http://svc/")
		require.NoError(t, err)
		resp.Body.Close()
	}
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("the dead instance was not ejected")
	}
	r, err := adapter.For(lb).Route(context.Background(), "svc", nil)
	require.NoError(t, err)
	require.Equal(t, 1, r.Len())
}
