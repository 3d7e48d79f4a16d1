package debugpage_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/debugpage"
)

// emptySource answers every name with an empty list, as a Nacos server does
// for a name nothing was ever registered under.
type emptySource struct{ watches atomic.Int64 }

func (s *emptySource) Instances(context.Context, string) ([]graylb.Instance, error) { return nil, nil }
func (s *emptySource) Watch(string, func([]graylb.Instance)) (func(), error) {
	s.watches.Add(1)
	return func() { s.watches.Add(-1) }, nil
}

// Picks of names that never had an instance fail; each failure is counted
// in one bounded aggregate (a counter and the last few names) that the
// debug page, PickCounters and so metrics show. Before, after 20 such
// failures the page showed no failure at all.
func TestUnroutedFailuresAreVisible(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lb      func(t *testing.T, opts ...graylb.Option) *graylb.LoadBalancer
		wantErr error
	}{
		{"registry: unknown service", func(t *testing.T, opts ...graylb.Option) *graylb.LoadBalancer {
			lb, _ := newTestLB(t, []graylb.Instance{inst("known", 1)}, opts...)
			return lb
		}, graylb.ErrUnknownService},
		{"Nacos-like: an empty list", func(t *testing.T, opts ...graylb.Option) *graylb.LoadBalancer {
			lb, err := graylb.New(&emptySource{}, append([]graylb.Option{graylb.WithContextHandler(testHandler)}, opts...)...)
			require.NoError(t, err)
			t.Cleanup(func() { lb.Close() })
			return lb
		}, graylb.ErrNoInstance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			picks := debugpage.NewPickCounters()
			lb := tc.lb(t, graylb.WithObserver(picks.Observe))
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

			h := debugpage.Handler(lb, debugpage.WithPickCounters(picks))
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
	picks := debugpage.NewPickCounters()
	lb, _ := newTestLB(t, []graylb.Instance{inst("known", 1)}, graylb.WithObserver(picks.Observe))
	names := []string{"", "a/b", "<script>alert(1)</script>", strings.Repeat("x", 10_000), "..", "ok-name"}
	for _, n := range names {
		_, err := lb.Pick(context.Background(), n)
		require.Error(t, err)
	}
	h := debugpage.Handler(lb, debugpage.WithPickCounters(picks))
	doc := debugJSON(t, h)
	require.Equal(t, float64(len(names)), path(doc, "unrouted", "failed"))
	recent, _ := path(doc, "unrouted", "recent").([]any)
	require.Len(t, recent, len(names))
	require.Equal(t, "ok-name", path(recent[0], "service"))
	for _, r := range recent {
		require.LessOrEqual(t, len(path(r, "service").(string)), graylb.MaxServiceNameLen+3, "a long name is clipped")
		require.LessOrEqual(t, len(path(r, "error").(string)), 2*graylb.MaxServiceNameLen, "so is its error")
	}
	_, page := debugGet(t, h, "/")
	require.NotContains(t, page, "<script>alert")
	require.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Equal(t, uint64(len(names)), picks.Counts("<unrouted>")["prod"]["failed"])
}

// A service the LoadBalancer knows (one it routes, or one its Cache
// follows for an adapter) shows its failed picks under its own name.
func TestFailedPicksOfAKnownServiceShowUnderItsName(t *testing.T) {
	picks := debugpage.NewPickCounters()
	lb, reg := newTestLB(t, []graylb.Instance{inst("routed", 1), inst("gray-only", 2, "gray", "true")},
		graylb.WithObserver(picks.Observe), graylb.WithCacheOptions(graylb.WithEmptyProtection(false)))
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
	require.ErrorIs(t, err, graylb.ErrNoInstance)
	require.Equal(t, uint64(1), picks.Counts("gray-only")["prod"]["failed"])

	// A service the Cache follows (an adapter watches it) with no
	// instance, never routed by the LoadBalancer: the debug page lists it,
	// so its failed picks are shown under its name.
	require.NoError(t, reg.Register(inst("followed", 3)))
	require.NoError(t, reg.Deregister("followed", "127.0.0.1:3"))
	stop, err := adapter.For(lb).Cache().Watch("followed", func([]graylb.Instance) {})
	require.NoError(t, err)
	defer stop()
	require.Contains(t, lb.Services(), "followed")
	_, err = lb.Pick(withHeaders(ctx, "gray", "true"), "followed")
	require.ErrorIs(t, err, graylb.ErrNoInstance)
	require.Equal(t, uint64(1), picks.Counts("followed")["gray"]["failed"])
	require.Nil(t, picks.Counts("<unrouted>"), "nothing in the aggregate")

	doc := debugJSON(t, debugpage.Handler(lb, debugpage.WithPickCounters(picks)))
	require.Equal(t, 1.0, path(doc, "picks", "followed", "gray", "failed"))
	require.Equal(t, 0.0, path(doc, "unrouted", "failed"))
}
