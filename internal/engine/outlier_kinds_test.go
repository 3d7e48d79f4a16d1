package engine

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordEjections returns a config whose OnEjection records every event.
func recordEjections(cfg OutlierConfig) (OutlierConfig, func() []Ejection) {
	var mu sync.Mutex
	var evs []Ejection
	cfg.OnEjection = func(e Ejection) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	}
	return cfg, func() []Ejection {
		mu.Lock()
		defer mu.Unlock()
		return append([]Ejection(nil), evs...)
	}
}

// answer routes one request with ctx and ends a call to the candidate at
// addr with a, reporting whether addr was a candidate.
func answer(t *testing.T, lb *LoadBalancer, ctx context.Context, addr string, a Answer, retryAfter time.Duration) bool {
	t.Helper()
	r, err := lb.routeReq(ctx, "svc")
	require.NoError(t, err)
	for i, in := range r.Instances() {
		if in.Addr() == addr {
			r.Call(i).End(a, retryAfter)
			return true
		}
	}
	return false
}

// A gray build broken on every instance is contained: two or three gray
// instances failing every call are all ejected (no cap holds one back), and
// gray requests go to prod, though the ejection cap and the panic threshold
// would have kept a prod kind's instances in rotation.
func TestEjection_BrokenGrayBuildFallsBackWhateverItsSize(t *testing.T) {
	for _, grays := range []int{2, 3} {
		t.Run("", func(t *testing.T) {
			md := [][]string{nil, nil}
			for i := 0; i < grays; i++ {
				md = append(md, []string{"gray", "true"})
			}
			list := mix("svc", md...)
			lb, _, _, events := ejectionLB(t, list, OutlierConfig{})
			grayCtx := withHeaders(context.Background(), "gray", "true")
			for _, in := range list[2:] {
				failN(t, lb, grayCtx, in.Addr(), 5)
				waitRebuild(t, events)
			}
			r, err := lb.routeReq(grayCtx, "svc")
			require.NoError(t, err)
			require.Equal(t, FellBack, r.Outcome)
			got, err := pickedSet(t, lb, grayCtx, "svc", 40)
			require.NoError(t, err)
			require.Equal(t, addrs(list[:2]), got, "every gray instance out: gray requests go to prod")
			got, err = pickedSet(t, lb, context.Background(), "svc", 40)
			require.NoError(t, err)
			require.Equal(t, addrs(list[:2]), got, "prod requests never reach gray")
		})
	}
}

// Two of three gray instances broken: gray requests go to the working one
// only; the panic threshold, which would route them over all three (one in
// three usable), does not apply to a kind that has a fall-back.
func TestEjection_PartlyBrokenGrayDoesNotPanic(t *testing.T) {
	list := mix("svc", nil, []string{"gray", "true"}, []string{"gray", "true"}, []string{"gray", "true"})
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{})
	grayCtx := withHeaders(context.Background(), "gray", "true")
	for _, in := range list[1:3] {
		failN(t, lb, grayCtx, in.Addr(), 5)
		waitRebuild(t, events)
	}
	got, err := pickedSet(t, lb, grayCtx, "svc", 40)
	require.NoError(t, err)
	require.Equal(t, []string{list[3].Addr()}, got)
}

// An instance that fails gray-marked requests only (no gray instance: gray
// requests fall back to prod) is taken out for gray requests while prod
// requests, which it serves, reset nothing of that count; prod requests
// still reach it.
func TestEjection_FailsOneKindOfRequestOnly(t *testing.T) {
	list := mix("svc", nil, nil, nil)
	cfg, evs := recordEjections(OutlierConfig{})
	lb, _, _, events := ejectionLB(t, list, cfg)
	grayCtx := withHeaders(context.Background(), "gray", "true")
	prodCtx := context.Background()
	bad := list[1].Addr()
	for fails := 0; fails < 5; {
		require.True(t, answer(t, lb, prodCtx, bad, AnswerOK, 0))
		if answer(t, lb, grayCtx, bad, AnswerFailed, 0) {
			fails++
		}
	}
	waitRebuild(t, events)
	got, err := pickedSet(t, lb, grayCtx, "svc", 60)
	require.NoError(t, err)
	require.Equal(t, []string{list[0].Addr(), list[2].Addr()}, got, "gray requests avoid it")
	got, err = pickedSet(t, lb, prodCtx, "svc", 60)
	require.NoError(t, err)
	require.Equal(t, addrs(list), got, "prod requests still reach it")
	e := evs()
	require.Len(t, e, 1)
	require.Equal(t, "gray", e[0].Requests)
	require.Equal(t, "consecutive-failures", e[0].Reason)

	// A gray call begun after its ejection that succeeds (routed to it in
	// a panic, say) brings it back for gray at once.
	st := lb.healthOf("svc").statsOf(list[1])
	c := started{stats: st, start: st.begin(), kind: Gray}
	c.Done(true)
	require.False(t, st.EjectedFor(Gray))
}

// An instance failing a fifth of its calls while its peers fail none is
// ejected by rate (no five failures in a row ever come).
func TestEjection_FailureRateAmongPeers(t *testing.T) {
	list := mix("svc", nil, nil, nil)
	cfg, evs := recordEjections(OutlierConfig{})
	lb, _, _, _ := ejectionLB(t, list, cfg)
	ctx := context.Background()
	calls := 0
	for ; calls < 1000 && len(evs()) == 0; calls++ {
		for i, in := range list {
			a := AnswerOK
			if i == 1 && calls%5 == 4 {
				a = AnswerFailed
			}
			answer(t, lb, ctx, in.Addr(), a, 0)
		}
	}
	e := evs()
	require.Len(t, e, 1, "ejected after %d calls each", calls)
	require.Equal(t, list[1].Addr(), e[0].Addr)
	require.Equal(t, "failure-rate", e[0].Reason)
	require.LessOrEqual(t, calls, 40, "a fifth failing is seen within 40 calls")
}

// A gray build failing a fifth of its calls, beside prod failing none: its
// gray instance is ejected by rate against prod's baseline, and gray
// requests fall back to prod.
func TestEjection_GrayFailingAFifthFallsBack(t *testing.T) {
	list := mix("svc", nil, nil, []string{"gray", "true"})
	cfg, evs := recordEjections(OutlierConfig{})
	lb, _, _, events := ejectionLB(t, list, cfg)
	grayCtx := withHeaders(context.Background(), "gray", "true")
	for n := 0; n < 200 && len(evs()) == 0; n++ {
		answer(t, lb, context.Background(), list[0].Addr(), AnswerOK, 0)
		answer(t, lb, context.Background(), list[1].Addr(), AnswerOK, 0)
		a := AnswerOK
		if n%5 == 0 {
			a = AnswerFailed
		}
		answer(t, lb, grayCtx, list[2].Addr(), a, 0)
	}
	require.NotEmpty(t, evs())
	waitRebuild(t, events)
	r, err := lb.routeReq(grayCtx, "svc")
	require.NoError(t, err)
	require.Equal(t, FellBack, r.Outcome)
}

// With no baseline (no other prod instance), an instance failing more
// than FailurePercentage of its calls, never five in a row, is ejected.
func TestEjection_FailurePercentageWithoutBaseline(t *testing.T) {
	list := mix("svc", []string{"gray", "true"})
	cfg, evs := recordEjections(OutlierConfig{})
	lb, _, _, _ := ejectionLB(t, list, cfg)
	grayCtx := withHeaders(context.Background(), "gray", "true")
	for n := 0; n < 200 && len(evs()) == 0; n++ {
		a := AnswerFailed
		if n%3 == 2 {
			a = AnswerOK
		}
		answer(t, lb, grayCtx, list[0].Addr(), a, 0)
	}
	e := evs()
	require.Len(t, e, 1)
	require.Equal(t, "failure-percentage", e[0].Reason)
}

// Instances failing alike are never ejected by rate: 3 prod instances and
// a gray one, each failing 3 % of calls at random, 30 000 calls.
func TestEjection_FailureRateNoFalsePositives(t *testing.T) {
	list := mix("svc", nil, nil, nil, []string{"gray", "true"})
	cfg, evs := recordEjections(OutlierConfig{ConsecutiveFailures: 1000})
	lb, _, _, _ := ejectionLB(t, list, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	grayCtx := withHeaders(context.Background(), "gray", "true")
	for n := 0; n < 30000; n++ {
		i := rng.IntN(len(list))
		ctx := context.Background()
		if i == 3 {
			ctx = grayCtx
		}
		a := AnswerOK
		if rng.Float64() < 0.03 {
			a = AnswerFailed
		}
		answer(t, lb, ctx, list[i].Addr(), a, 0)
	}
	require.Empty(t, evs())
}

// An overloaded answer pauses the instance without counting toward its
// ejection: for its Retry-After (capped) or OverloadPause; picks avoid it
// meanwhile, and it is back when the pause is up.
func TestOverload_PausesWithoutEjecting(t *testing.T) {
	for _, tc := range []struct {
		retryAfter, want time.Duration
	}{{30 * time.Second, 30 * time.Second}, {time.Hour, DefaultMaxRetryAfter}, {0, DefaultOverloadPause}} {
		list := mix("svc", nil, nil)
		cfg, evs := recordEjections(OutlierConfig{})
		lb, _, clk, events := ejectionLB(t, list, cfg)
		ctx := context.Background()
		require.True(t, answer(t, lb, ctx, list[1].Addr(), AnswerOverloaded, tc.retryAfter))
		waitRebuild(t, events)
		got, err := pickedSet(t, lb, ctx, "svc", 20)
		require.NoError(t, err)
		require.Equal(t, []string{list[0].Addr()}, got)
		e := evs()
		require.Len(t, e, 1)
		require.Equal(t, "overloaded", e[0].Reason)
		require.Equal(t, tc.want, e[0].For)
		clk.Advance(tc.want)
		waitRebuild(t, events)
		got, err = pickedSet(t, lb, ctx, "svc", 20)
		require.NoError(t, err)
		require.Equal(t, addrs(list), got)
		// The pause was no ejection: the first one after it lasts the base time.
		failN(t, lb, ctx, list[1].Addr(), 5)
		waitRebuild(t, events)
		require.Equal(t, DefaultBaseEjectionTime, evs()[2].For)
	}
}

// P2C prices an instance that refuses calls fast (overloaded) as one that
// failed: of two instances, the overloaded one gets almost no picks.
func TestOverload_P2CDoesNotFavourFastRefusals(t *testing.T) {
	list := mix("svc", nil, nil)
	lb, _ := newTestLB(t, list, WithPolicy(P2C()))
	ctx := context.Background()
	counts := map[string]int{}
	for n := 0; n < 2000; n++ {
		r, err := lb.routeReq(ctx, "svc")
		require.NoError(t, err)
		c := r.Start()
		counts[c.Instance.Addr()]++
		if c.Instance.Addr() == list[1].Addr() {
			c.End(AnswerOverloaded, 0)
		} else {
			c.End(AnswerOK, 0)
		}
	}
	require.Less(t, counts[list[1].Addr()], 200, "%v", counts)
}

// An instance overloaded again as soon as its pause ends is paused twice as
// long each time, at most MaxRetryAfter; an answer that is not overloaded
// starts the count again.
func TestOverload_RepeatedPausesGrow(t *testing.T) {
	list := mix("svc", nil, nil)
	cfg, evs := recordEjections(OutlierConfig{})
	lb, _, clk, events := ejectionLB(t, list, cfg)
	ctx := context.Background()
	pauseFor := func() time.Duration {
		t.Helper()
		n := len(evs())
		st := lb.healthOf("svc").statsOf(list[1])
		c := started{stats: st, start: st.begin(), kind: Prod}
		c.End(AnswerOverloaded, 0)
		waitRebuild(t, events)
		e := evs()
		require.Len(t, e, n+1)
		d := e[n].For
		clk.Advance(d)
		waitRebuild(t, events)
		return d
	}
	var got []time.Duration
	for range 7 {
		got = append(got, pauseFor())
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}, got)
	require.True(t, answer(t, lb, ctx, list[1].Addr(), AnswerOK, 0))
	require.Equal(t, time.Second, pauseFor(), "an answer that was not overloaded starts the count again")
}
