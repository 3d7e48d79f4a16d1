package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEjection_LastProdInstanceIsRoutedInAPanic: a kind's only instance
// ejected is still routed to (fewer than PanicThreshold percent of the
// kind usable), so its requests do not fail for the whole ejection time;
// and once it answers a call begun after the ejection it is back at once.
func TestEjection_LastProdInstanceIsRoutedInAPanic(t *testing.T) {
	list := mix("svc", nil)
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{})
	prodCtx := withHeaders(context.Background(), "gray", "false")
	addr := list[0].Addr()

	failN(t, lb, prodCtx, addr, 5)
	waitRebuild(t, events)
	st := lb.healthOf("svc").statsOf(list[0])
	require.True(t, st.Ejected(), "5 failures in a row eject it")
	in, err := lb.Pick(prodCtx, "svc")
	require.NoError(t, err, "the only prod instance is routed over while ejected")
	require.Equal(t, addr, in.Addr())

	// It answers again: back at once, without waiting for its ejection time.
	r, err := lb.routeReq(prodCtx, "svc")
	require.NoError(t, err)
	r.Call(0).Done(true)
	require.False(t, st.Ejected(), "an answer to a call begun after the ejection readmits it")
	waitRebuild(t, events)
}

// TestEjection_AnswerToACallBegunBeforeTheEjectionDoesNotReadmit: a call
// that was in flight when the instance was ejected says nothing of its
// state since.
func TestEjection_AnswerToACallBegunBeforeTheEjectionDoesNotReadmit(t *testing.T) {
	list := mix("svc", nil, nil)
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{})
	prodCtx := withHeaders(context.Background(), "gray", "false")
	r, err := lb.routeReq(prodCtx, "svc")
	require.NoError(t, err)
	i := 0
	if r.Instances()[1].Addr() == list[1].Addr() {
		i = 1
	}
	early := r.Call(i) // to list[1], begun before the ejection
	failN(t, lb, prodCtx, list[1].Addr(), 5)
	waitRebuild(t, events)
	st := lb.healthOf("svc").statsOf(list[1])
	require.True(t, st.Ejected())
	early.Done(true)
	require.True(t, st.Ejected(), "a call begun before the ejection does not readmit it")
	got, err := pickedSet(t, lb, prodCtx, "svc", 20)
	require.NoError(t, err)
	require.Equal(t, []string{list[0].Addr()}, got, "1 of 2 usable is 50 %: no panic")
}

// TestEjection_GrayFallsBackBeforeItPanics: every gray instance ejected,
// a gray request goes to prod while prod has a usable instance; when prod
// has none either, each kind is routed over its own instances, and prod
// never reaches gray.
func TestEjection_GrayFallsBackBeforeItPanics(t *testing.T) {
	list := mix("svc", nil, []string{"gray", "true"})
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{})
	prodCtx := withHeaders(context.Background(), "gray", "false")
	grayCtx := withHeaders(context.Background(), "gray", "true")
	prodAddr, grayAddr := list[0].Addr(), list[1].Addr()

	failN(t, lb, grayCtx, grayAddr, 5)
	waitRebuild(t, events)
	r, err := lb.routeReq(grayCtx, "svc")
	require.NoError(t, err)
	require.Equal(t, FellBack, r.Outcome, "gray falls back to prod rather than panic")
	require.Equal(t, []string{prodAddr}, addrs(r.Instances()))

	failN(t, lb, prodCtx, prodAddr, 5)
	waitRebuild(t, events)
	got, err := pickedSet(t, lb, prodCtx, "svc", 20)
	require.NoError(t, err)
	require.Equal(t, []string{prodAddr}, got, "prod panics over its own instance, never gray")
	got, err = pickedSet(t, lb, grayCtx, "svc", 20)
	require.NoError(t, err)
	require.Equal(t, []string{grayAddr}, got, "nothing usable anywhere: gray panics over its own")
}

// TestEjection_PanicThresholdPercent: with MaxEjectionPercent 100, 2 of 3
// prod instances ejected leave 33 % usable, below the default threshold
// (50): all 3 are routed; a threshold of 1 keeps them out.
func TestEjection_PanicThresholdPercent(t *testing.T) {
	for _, tc := range []struct {
		threshold, want int
	}{{0, 3}, {1, 1}, {33, 1}, {34, 3}} {
		list := mix("svc", nil, nil, nil)
		lb, _, _, events := ejectionLB(t, list, OutlierConfig{MaxEjectionPercent: 100, PanicThreshold: tc.threshold})
		ctx := withHeaders(context.Background(), "gray", "false")
		failN(t, lb, ctx, list[1].Addr(), 5)
		waitRebuild(t, events)
		failN(t, lb, ctx, list[2].Addr(), 5)
		waitRebuild(t, events)
		got, err := pickedSet(t, lb, ctx, "svc", 60)
		require.NoError(t, err)
		require.Len(t, got, tc.want, "threshold %d", tc.threshold)
	}
}

// TestStats_TimedOutCallCountsTheTimeWaited: a call ended as failed after
// waiting 1.5 s counts as at least that latency and as a failure.
func TestStats_TimedOutCallCountsTheTimeWaited(t *testing.T) {
	s := &Stats{}
	start := s.begin() - int64(1500*time.Millisecond)
	started{stats: s, start: start}.Done(false)
	require.GreaterOrEqual(t, s.Latency(), 1400*time.Millisecond)
	require.Zero(t, s.InFlight())
}

// TestP2C_PricesUnansweredCallsByTheirAge: an instance never measured
// whose two calls have waited 200 ms without an answer costs more than a
// measured 1 ms instance with a call in flight: P2C sends nothing to it.
func TestP2C_PricesUnansweredCallsByTheirAge(t *testing.T) {
	hung, fast := &Stats{}, &Stats{}
	fast.observe(monoNow(), float64(time.Millisecond))
	hung.begin()
	hung.begin()
	hung.waiting.Store(monoNow() - int64(200*time.Millisecond))
	fast.begin()
	p := P2C().(StatsPolicy).NewStatsPicker(mix("svc", nil, nil), []*Stats{hung, fast})
	n := 0
	for range 1000 {
		if p.Next() == 0 {
			n++
		}
	}
	require.Zero(t, n, "the instance whose call hangs was picked %d times of 1000", n)
}

// TestEjection_ReportedAnswerReadmitsOnlyWhenItBeganAfterTheEjection: a
// success reported without a call (Stats.Report) readmits an ejected
// instance only when its latency shows it began after the ejection; one of
// unknown latency (0: a straggler picked before the ejection, say) does
// not.
func TestEjection_ReportedAnswerReadmitsOnlyWhenItBeganAfterTheEjection(t *testing.T) {
	list := mix("svc", nil, nil)
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{})
	ctx := withHeaders(context.Background(), "gray", "false")
	failN(t, lb, ctx, list[1].Addr(), 5)
	waitRebuild(t, events)
	st := lb.healthOf("svc").statsOf(list[1])
	require.True(t, st.Ejected())
	st.Report(true, 0)
	require.True(t, st.Ejected(), "a success of unknown start readmitted it")
	st.Report(true, time.Hour)
	require.True(t, st.Ejected(), "a success begun an hour ago readmitted it")
	st.Report(true, time.Nanosecond)
	require.False(t, st.Ejected(), "a success begun after the ejection did not readmit it")
	waitRebuild(t, events)
}

// TestP2C_ALongCallDoesNotStarveItsInstance: an instance holding one
// long call (a stream) whose other calls got their results is priced by
// its latency, not by the long call's age: the calls that wait are those
// begun since its last result, and one of them alone is not a hang.
func TestP2C_ALongCallDoesNotStarveItsInstance(t *testing.T) {
	streaming, other := &Stats{}, &Stats{}
	for _, s := range []*Stats{streaming, other} {
		s.observe(monoNow(), float64(time.Millisecond))
		s.begin() // a stream, still open
		started{stats: s, start: s.begin()}.Done(true)
	}
	streaming.waiting.Store(monoNow() - int64(10*time.Second)) // its last result, 10 s ago
	p := P2C().(StatsPolicy).NewStatsPicker(mix("svc", nil, nil), []*Stats{streaming, other})
	n := 0
	for range 1000 {
		if p.Next() == 0 {
			n++
		}
	}
	require.Greater(t, n, 100, "the instance holding a stream was picked %d times of 1000", n)
}

// TestP2C_CancelledCallsDoNotPriceTheInstance: calls its callers
// cancelled are no longer waiting: an instance whose two pending calls
// were cancelled is priced by its latency again.
func TestP2C_CancelledCallsDoNotPriceTheInstance(t *testing.T) {
	cancelled, other := &Stats{}, &Stats{}
	for _, s := range []*Stats{cancelled, other} {
		s.observe(monoNow(), float64(time.Millisecond))
	}
	started{stats: cancelled, start: cancelled.begin()}.Discard()
	started{stats: cancelled, start: cancelled.begin()}.Discard()
	cancelled.waiting.Store(monoNow() - int64(10*time.Second))
	cancelled.begin()
	other.begin()
	p := P2C().(StatsPolicy).NewStatsPicker(mix("svc", nil, nil), []*Stats{cancelled, other})
	n := 0
	for range 1000 {
		if p.Next() == 0 {
			n++
		}
	}
	require.Greater(t, n, 100, "the instance whose calls were cancelled was picked %d times of 1000", n)
}
