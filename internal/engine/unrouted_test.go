package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

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

// Picks of names that never had an instance fail; each failure is counted
// in one bounded aggregate (a counter and the last few names) that the
// debug page, PickCounters and so metrics show. Before, after 20 such
// failures the page showed no failure at all.
func TestUnroutedFailuresAreVisible(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lb      func(t *testing.T, opts ...Option) *LoadBalancer
		wantErr error
	}{
		{"registry: unknown service", func(t *testing.T, opts ...Option) *LoadBalancer {
			lb, _ := newTestLB(t, []Instance{inst("known", 1)}, opts...)
			return lb
		}, ErrUnknownService},
		{"Nacos-like: an empty list", func(t *testing.T, opts ...Option) *LoadBalancer {
			lb, err := New(&emptySource{}, append([]Option{WithContextHandler(testHandler)}, opts...)...)
			require.NoError(t, err)
			t.Cleanup(func() { lb.Close() })
			return lb
		}, ErrNoInstance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			picks := NewPickCounters()
			lb := tc.lb(t, WithObserver(picks.Observe))
			gray := withHeaders(context.Background(), "gray", "true")
			before := time.Now()
			// 20 failed picks of 12 names: missing-0 .. missing-11, then
			// missing-0 .. missing-7 again; every other one gray.
			for i := 0; i < 20; i++ {
				ctx := context.Background()
				if i%2 == 1 {
					ctx = gray
				}
				_, err := lb.Pick(ctx, fmt.Sprintf("missing-%d", i%12))
				require.ErrorIs(t, err, tc.wantErr)
			}

			require.Equal(t, uint64(10), picks.Counts("<unrouted>")["prod"]["failed"])
			require.Equal(t, uint64(10), picks.Counts("<unrouted>")["gray"]["failed"])
			require.Nil(t, picks.Counts("missing-1"), "no state per unknown name")

			h := DebugHandler(lb, WithPickCounters(picks))
			doc := debugJSON(t, h)
			require.Equal(t, 20.0, path(doc, "unrouted", "failed"), "%v", doc["unrouted"])
			recent, _ := path(doc, "unrouted", "recent").([]any)
			var names []string
			for _, r := range recent {
				names = append(names, path(r, "service").(string))
				require.Contains(t, path(r, "error"), path(r, "service").(string), "the error names the service")
				at, err := time.Parse(time.RFC3339Nano, path(r, "at").(string))
				require.NoError(t, err)
				require.False(t, at.Before(before.Truncate(time.Second)))
			}
			require.Equal(t, []string{"missing-7", "missing-6", "missing-5", "missing-4", "missing-3", "missing-2", "missing-1", "missing-0"},
				names, "the last 8 names, newest first, each once")
			require.Equal(t, "gray", path(recent[0], "kind"), "missing-7 was last picked by a gray request")
			require.Equal(t, "prod", path(recent[1], "kind"))
			require.Equal(t, 10.0, path(doc, "picks", "<unrouted>", "gray", "failed"))
			require.Empty(t, doc["services"], "no service is routed for them")

			_, page := debugGet(t, h, "/")
			require.Contains(t, page, `<td class="num" id="unrouted-failed">20</td>`)
			require.Contains(t, page, "missing-7")
			require.NotContains(t, page, "missing-8", "out of the last 8")
		})
	}
}

// Hostile names: invalid, long, with markup; counted and shown as text,
// the aggregate bounded.
func TestUnroutedFailuresHostileNames(t *testing.T) {
	picks := NewPickCounters()
	lb, _ := newTestLB(t, []Instance{inst("known", 1)}, WithObserver(picks.Observe))
	names := []string{"", "a/b", "<script>alert(1)</script>", strings.Repeat("x", 10_000), "..", "ok-name"}
	for _, n := range names {
		_, err := lb.Pick(context.Background(), n)
		require.Error(t, err)
	}
	h := DebugHandler(lb, WithPickCounters(picks))
	doc := debugJSON(t, h)
	require.Equal(t, float64(len(names)), path(doc, "unrouted", "failed"))
	recent, _ := path(doc, "unrouted", "recent").([]any)
	require.Len(t, recent, len(names))
	require.Equal(t, "ok-name", path(recent[0], "service"))
	for _, r := range recent {
		require.LessOrEqual(t, len(path(r, "service").(string)), MaxServiceNameLen+3, "a long name is clipped")
		require.LessOrEqual(t, len(path(r, "error").(string)), 2*MaxServiceNameLen, "so is its error")
	}
	_, page := debugGet(t, h, "/")
	require.NotContains(t, page, "<script>alert")
	require.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Equal(t, uint64(len(names)), picks.Counts("<unrouted>")["prod"]["failed"])
}

// A service the LoadBalancer knows (one it routes, or one its Cache
// follows for an adapter) shows its failed picks under its own name.
func TestFailedPicksOfAKnownServiceShowUnderItsName(t *testing.T) {
	picks := NewPickCounters()
	lb, reg := newTestLB(t, []Instance{inst("routed", 1), inst("gray-only", 2, "gray", "true")},
		WithObserver(picks.Observe), WithCacheOptions(WithEmptyProtection(false)))
	ctx := context.Background()

	// Routed, then every instance gone.
	_, err := lb.Pick(ctx, "routed")
	require.NoError(t, err)
	require.NoError(t, reg.Deregister("routed", "127.0.0.1:1"))
	require.Eventually(t, func() bool {
		_, err := lb.Pick(ctx, "routed")
		return err != nil
	}, 5*time.Second, time.Millisecond, "the empty list applied")
	require.Positive(t, picks.Counts("routed")["prod"]["failed"])

	// A prod request to a service with gray instances only.
	_, err = lb.Pick(ctx, "gray-only")
	require.ErrorIs(t, err, ErrNoInstance)
	require.Equal(t, uint64(1), picks.Counts("gray-only")["prod"]["failed"])

	// A service the Cache follows (an adapter watches it) with no
	// instance, never routed by the LoadBalancer: the debug page lists it,
	// so its failed picks are shown under its name.
	require.NoError(t, reg.Register(inst("followed", 3)))
	require.NoError(t, reg.Deregister("followed", "127.0.0.1:3"))
	stop, err := lb.cache.Watch("followed", func([]Instance) {})
	require.NoError(t, err)
	defer stop()
	require.Contains(t, lb.Services(), "followed")
	_, err = lb.Pick(withHeaders(ctx, "gray", "true"), "followed")
	require.ErrorIs(t, err, ErrNoInstance)
	require.Equal(t, uint64(1), picks.Counts("followed")["gray"]["failed"])
	require.Nil(t, picks.Counts("<unrouted>"), "nothing in the aggregate")

	doc := debugJSON(t, DebugHandler(lb, WithPickCounters(picks)))
	require.Equal(t, 1.0, path(doc, "picks", "followed", "gray", "failed"))
	require.Equal(t, 0.0, path(doc, "unrouted", "failed"))
}

// The aggregate holds the last MaxUnroutedRecent distinct names, newest
// first, and counts every failure, whatever the sequence of names.
func TestUnroutedLogProperty(t *testing.T) {
	require.Equal(t, "<unrouted>", UnroutedService, "the name metrics and dashboards see")
	require.ErrorIs(t, ValidateServiceName(UnroutedService), ErrInvalidService, "no service can be counted under it")
	rng := rand.New(rand.NewSource(1))
	for run := 0; run < 200; run++ {
		var l unroutedLog
		var seq []string
		for i, n := 0, rng.Intn(40); i < n; i++ {
			name := fmt.Sprintf("n%d", rng.Intn(1+rng.Intn(16)))
			seq = append(seq, name)
			l.record(name, Kind(rng.Intn(2)), fmt.Errorf("no %s", name))
		}
		// The model: the distinct names, by their last failure, newest first.
		var want []string
		seen := map[string]bool{}
		for i := len(seq) - 1; i >= 0 && len(want) < MaxUnroutedRecent; i-- {
			if !seen[seq[i]] {
				seen[seq[i]] = true
				want = append(want, seq[i])
			}
		}
		st := l.state()
		require.Equal(t, uint64(len(seq)), st.Failed)
		got := []string{}
		for _, p := range st.Recent {
			got = append(got, p.Service)
			require.Equal(t, "no "+p.Service, p.Error)
		}
		if want == nil {
			want = []string{}
		}
		require.Equal(t, want, got, "after %v", seq)
	}
}

// Many goroutines failing at once: every failure counted, the list
// bounded and free of duplicates (run with -race).
func TestUnroutedConcurrent(t *testing.T) {
	lb, err := New(&emptySource{})
	require.NoError(t, err)
	defer lb.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				_, _ = lb.Pick(context.Background(), fmt.Sprintf("g%d-%d", g, i%20))
				_ = lb.Unrouted()
			}
		}(g)
	}
	wg.Wait()
	st := lb.Unrouted()
	require.Equal(t, uint64(1000), st.Failed)
	require.Len(t, st.Recent, MaxUnroutedRecent)
	seen := map[string]bool{}
	for _, p := range st.Recent {
		require.False(t, seen[p.Service], "listed twice: %s", p.Service)
		seen[p.Service] = true
	}
}

// A name failing again is kept as the log's own copy, not as the caller's
// string, which may be a slice of a much larger buffer (a request line, a
// header block) that the log would otherwise keep alive.
func TestUnroutedLog_KeepsItsOwnCopyOfANameListedAgain(t *testing.T) {
	var l unroutedLog
	l.record(strings.Clone("svc-a"), Prod, errors.New("no svc-a"))
	buf := strings.Repeat("x", 1<<20) + "svc-a"
	l.record(buf[len(buf)-len("svc-a"):], Gray, errors.New("no svc-a"))
	st := l.state()
	require.Len(t, st.Recent, 1)
	require.Equal(t, "svc-a", st.Recent[0].Service)
	require.Equal(t, Gray, st.Recent[0].Kind)
	lo := uintptr(unsafe.Pointer(unsafe.StringData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(st.Recent[0].Service)))
	require.False(t, p >= lo && p < lo+uintptr(len(buf)), "the log keeps the caller's buffer of %d bytes alive", len(buf))
}
