package debugpage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// headerKey carries fake request headers in tests.
type headerKey struct{}

func withHeaders(ctx context.Context, kv ...string) context.Context {
	h := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return context.WithValue(ctx, headerKey{}, h)
}

var testHandler = graylb.ContextHandlerFunc(func(ctx context.Context, name string) string {
	h, _ := ctx.Value(headerKey{}).(map[string]string)
	return h[name]
})

// inst makes a usable instance; md is key, value pairs.
func inst(service string, port int, md ...string) graylb.Instance {
	m := map[string]string{}
	for i := 0; i+1 < len(md); i += 2 {
		m[md[i]] = md[i+1]
	}
	return graylb.NewInstance(service, "127.0.0.1", port, m)
}

func mix(name string, md ...[]string) []graylb.Instance {
	out := make([]graylb.Instance, len(md))
	for i, m := range md {
		out[i] = inst(name, 9000+i, m...)
	}
	return out
}

func newTestLB(t testing.TB, list []graylb.Instance, opts ...graylb.Option) (*graylb.LoadBalancer, *graylb.Registry) {
	t.Helper()
	reg := graylb.NewRegistry()
	for _, in := range list {
		require.NoError(t, reg.Register(in))
	}
	opts = append([]graylb.Option{graylb.WithContextHandler(testHandler)}, opts...)
	lb, err := graylb.New(reg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb, reg
}

func debugGet(t *testing.T, h http.Handler, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// debugJSON returns the debug page's JSON as a generic document.
func debugJSON(t *testing.T, h http.Handler) map[string]any {
	t.Helper()
	_, body := debugGet(t, h, "/?format=json")
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &doc), body)
	return doc
}

// path walks a generic JSON document by object keys.
func path(doc any, keys ...string) any {
	for _, k := range keys {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[k]
	}
	return doc
}

// fakeClock fires its timers when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock and runs the timers that fell due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// ejectionLB is a LoadBalancer with outlier detection on a fake clock and
// a channel told of every rebuild after an ejection or readmission.
func ejectionLB(t *testing.T, list []graylb.Instance, cfg graylb.OutlierConfig, opts ...graylb.Option) (*graylb.LoadBalancer, *fakeClock, chan string) {
	t.Helper()
	clk := newFakeClock()
	cfg.Clock = clk
	lb, _ := newTestLB(t, list, append([]graylb.Option{graylb.WithOutlierDetection(cfg)}, opts...)...)
	events := make(chan string, 64)
	stop := adapter.For(lb).OnEjectionChange(func(s string) {
		select {
		case events <- s:
		default:
		}
	})
	t.Cleanup(stop)
	return lb, clk, events
}

// waitRebuild waits for the rebuild after an ejection or readmission.
func waitRebuild(t *testing.T, events chan string) {
	t.Helper()
	select {
	case <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("no rebuild after an ejection change")
	}
}

// callsTo starts n calls to the instance at addr through a route of ctx
// and returns them, not done.
func callsTo(t *testing.T, lb *graylb.LoadBalancer, ctx context.Context, addr string, n int) []adapter.Call {
	t.Helper()
	var calls []adapter.Call
	for len(calls) < n {
		r, err := adapter.For(lb).Route(ctx, "svc", nil)
		require.NoError(t, err)
		for i, in := range r.Instances() {
			if in.Addr() == addr {
				calls = append(calls, r.Call(i))
				break
			}
		}
	}
	return calls
}

// failN reports n failed calls to the instance at addr.
func failN(t *testing.T, lb *graylb.LoadBalancer, ctx context.Context, addr string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		callsTo(t, lb, ctx, addr, 1)[0].End(adapter.Failed)
	}
}
