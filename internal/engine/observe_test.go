package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestObservers(t *testing.T) {
	require.Nil(t, Observers(nil), "none: nil, which costs nothing")
	require.Nil(t, Observers(nil, nil, nil))

	a, b, c := newTestCounts(), newTestCounts(), newTestCounts()
	one := Observers(nil, a.Observe, nil)
	one("svc", Gray, FellBack)
	require.Equal(t, uint64(1), a.Counts("svc")["gray"]["fell_back"])

	lb, _ := newTestLB(t, []Instance{inst("svc", 9001), inst("svc", 9002, "gray", "true")},
		WithObserver(Observers(b.Observe, nil, c.Observe)))
	for i := 0; i < 3; i++ {
		_, err := lb.Pick(context.Background(), "svc")
		require.NoError(t, err)
	}
	_, err := lb.Pick(withHeaders(context.Background(), "gray", "true"), "svc")
	require.NoError(t, err)
	for _, pc := range []*testCounts{b, c} {
		require.Equal(t, uint64(3), pc.Counts("svc")["prod"]["selected"])
		require.Equal(t, uint64(1), pc.Counts("svc")["gray"]["selected"])
	}

	// In order, and allocation-free per pick, for two and for more.
	var order []int
	rec := func(i int) Observer { return func(string, Kind, Outcome) { order = append(order, i) } }
	Observers(rec(1), rec(2), nil, rec(3))("svc", Prod, Selected)
	require.Equal(t, []int{1, 2, 3}, order)
	two := Observers(a.Observe, b.Observe)
	three := Observers(a.Observe, b.Observe, c.Observe)
	require.Zero(t, testing.AllocsPerRun(1000, func() { two("svc", Prod, Selected) }))
	require.Zero(t, testing.AllocsPerRun(1000, func() { three("svc", Prod, Selected) }))
}
