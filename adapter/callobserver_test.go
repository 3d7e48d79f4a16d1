package adapter_test

import (
	"context"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type observedCall struct {
	service, addr string
	kind          graylb.Kind
	ok            bool
	latency       time.Duration
}

// A LoadBalancer's CallObserver is told of every call done, with or
// without Stats, by the kind of the instances that served it; not of a
// discarded call.
func TestCallObserver(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []graylb.Option
	}{
		{"without stats", nil},
		{"with stats", []graylb.Option{graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 100})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []observedCall
			obs := func(service string, inst graylb.Instance, kind graylb.Kind, ok bool, latency time.Duration) {
				seen = append(seen, observedCall{service, inst.Addr(), kind, ok, latency})
			}
			lb := newLB(t, append(tc.opts, graylb.WithCallObserver(obs))...)
			b := adapter.For(lb)
			ctx := context.Background()

			r, err := b.Route(ctx, "svc", gray("true"))
			require.NoError(t, err)
			c := r.Start()
			time.Sleep(2 * time.Millisecond) // must sleep: the call's duration is what the observer is told
			c.End(adapter.Failed)
			r, err = b.Route(ctx, "svc", gray("false"))
			require.NoError(t, err)
			r.Start().End(adapter.OK)
			r.Start().End(adapter.Cancelled)
			// Closed rules: a gray request falls back to prod and counts as prod.
			require.NoError(t, lb.SetRules(graylb.Rules{Closed: true}))
			r, err = b.Route(ctx, "svc", gray("true"))
			require.NoError(t, err)
			require.Equal(t, graylb.FellBack, r.Outcome)
			r.Start().End(adapter.OK)

			require.Len(t, seen, 3)
			assert.Equal(t, observedCall{"svc", "10.0.0.2:80", graylb.Gray, false, seen[0].latency}, seen[0])
			assert.GreaterOrEqual(t, seen[0].latency, 2*time.Millisecond, "the call's duration")
			assert.Less(t, seen[0].latency, time.Minute)
			assert.Equal(t, "10.0.0.1:80", seen[1].addr)
			assert.Equal(t, graylb.Prod, seen[1].kind)
			assert.True(t, seen[1].ok)
			assert.Equal(t, "10.0.0.1:80", seen[2].addr)
			assert.Equal(t, graylb.Prod, seen[2].kind, "a gray request served by prod")
		})
	}
}

// A call done without a CallObserver and without Stats costs nothing more
// than before; with one it allocates nothing.
func TestCallObserverAllocations(t *testing.T) {
	n := 0
	for _, opts := range [][]graylb.Option{nil, {graylb.WithCallObserver(func(string, graylb.Instance, graylb.Kind, bool, time.Duration) { n++ })}} {
		b := adapter.For(newLB(t, opts...))
		r, err := b.Route(context.Background(), "svc", gray("true"))
		require.NoError(t, err)
		allocs := testing.AllocsPerRun(100, func() { r.Start().End(adapter.OK) })
		assert.Zero(t, allocs)
	}
	assert.Equal(t, 101, n)
}
