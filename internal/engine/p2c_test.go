package engine

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// p2cShares picks n times through lb and returns the picks per port.
func p2cShares(t *testing.T, lb *LoadBalancer, ctx context.Context, n int, latency func(port int) time.Duration) map[int]int {
	t.Helper()
	got := map[int]int{}
	for i := 0; i < n; i++ {
		r, err := lb.routeReq(ctx, "svc")
		require.NoError(t, err)
		c := r.Start()
		got[c.Instance.Port]++
		// Report as if the call took latency(port).
		c.start = monoNow() - int64(latency(c.Instance.Port))
		c.Done(true)
	}
	return got
}

func TestP2C_AvoidsTheSlowInstance(t *testing.T) {
	lb, _ := newTestLB(t, mix("svc", nil, nil, nil, nil), WithPolicy(P2C()))
	// The slow one is far slower than any stall of a loaded machine between
	// a call's start and its Done (which adds to a fast one's latency).
	slow := func(port int) time.Duration {
		if port == 9003 {
			return 5 * time.Second
		}
		return 500 * time.Microsecond
	}
	p2cShares(t, lb, context.Background(), 200, slow) // warm up: every instance measured
	got := p2cShares(t, lb, context.Background(), 4000, slow)
	t.Logf("picks by port: %v", got)
	require.Less(t, got[9003], 40, "the slow instance gets under 1 %")
	// Among equally fast instances, called one at a time (nothing in
	// flight), the lower estimate wins: shares need not be even, but each
	// gets picks.
	for _, p := range []int{9000, 9001, 9002} {
		require.Positive(t, got[p])
	}
}

func TestP2C_AvoidsCallsInFlight(t *testing.T) {
	lb, _ := newTestLB(t, mix("svc", nil, nil), WithPolicy(P2C()))
	r, err := lb.routeReq(context.Background(), "svc")
	require.NoError(t, err)
	busy := r.Call(0)
	for i := 0; i < 10; i++ {
		r.Call(0) // ten calls in flight on the first instance
	}
	for i := 0; i < 50; i++ {
		require.Equal(t, 1, r.NextIndex())
	}
	busy.Discard()
}

func TestP2C_SlowInstanceIsRetriedAfterIdling(t *testing.T) {
	s := &Stats{}
	now := monoNow()
	s.observe(now, float64(20*time.Millisecond))
	require.InDelta(t, float64(20*time.Millisecond), s.cost(now), 1)
	// A faster result lowers a peak only by its weight.
	s.observe(now+int64(time.Millisecond), float64(time.Millisecond))
	require.Greater(t, s.cost(now+int64(time.Millisecond)), float64(19*time.Millisecond))
	// After a minute with no result the estimate has decayed below 1 ms.
	require.Less(t, s.cost(now+int64(time.Minute)), float64(time.Millisecond))
	// A failure counts as at least a second.
	s.Report(false, time.Microsecond)
	require.Greater(t, s.Latency(), 500*time.Millisecond)
}

func TestP2C_NoStatsIsRandom(t *testing.T) {
	p := P2C().NewPicker(mix("svc", nil, nil, nil))
	seen := map[int]bool{}
	for i := 0; i < 300; i++ {
		seen[p.Next()] = true
	}
	require.Len(t, seen, 3)
	require.Zero(t, P2C().NewPicker(mix("svc", nil)).Next())
}

func TestP2C_PickDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	lb, _ := newTestLB(t, mix("svc", nil, nil, nil, []string{"gray", "true"}), WithPolicy(P2C()),
		WithOutlierDetection(OutlierConfig{}))
	ctx := context.Background()
	_, err := lb.Pick(ctx, "svc")
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(500, func() { _, _ = lb.Pick(ctx, "svc") }))
	require.Zero(t, testing.AllocsPerRun(500, func() {
		r, _ := lb.routeReq(ctx, "svc")
		r.Start().Done(true)
	}))
}

// TestProperty_P2CWithEjectionKeepsGrayInvariants: P2C over random lists
// with random results and ejections keeps the gray rule.
func TestProperty_P2CWithEjectionKeepsGrayInvariants(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 13))
	for iter := 0; iter < 60; iter++ {
		list := randomList(rng, "svc")
		clk := newFakeClock()
		lb, err := New(&fakeSource{list: list}, WithContextHandler(testHandler), WithPolicy(P2C()),
			WithOutlierDetection(OutlierConfig{ConsecutiveFailures: 1 + rng.IntN(3), Clock: clk}))
		require.NoError(t, err)
		for k := 0; k < 40; k++ {
			v := grayValues[rng.IntN(len(grayValues))]
			r, err := lb.routeReq(withHeaders(context.Background(), "gray", v), "svc")
			if err != nil {
				require.ErrorIs(t, err, ErrNoInstance)
				continue
			}
			c := r.Start()
			require.True(t, c.Instance.Usable())
			if !IsGray(v) {
				require.False(t, IsGray(c.Instance.Metadata["gray"]), "seed %d: prod reached gray", seed)
			}
			if IsGray(v) && r.Outcome == Selected {
				require.True(t, IsGray(c.Instance.Metadata["gray"]), "seed %d", seed)
			}
			c.Done(rng.IntN(4) != 0)
			if rng.IntN(8) == 0 {
				clk.Advance(time.Duration(rng.IntN(90)) * time.Second)
			}
		}
		lb.Close()
	}
}
