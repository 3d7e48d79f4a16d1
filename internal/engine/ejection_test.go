package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// ejectionLB is a LoadBalancer with outlier detection on a fake clock and a
// channel told of each rebuild after an ejection or readmission.
func ejectionLB(t *testing.T, list []Instance, cfg OutlierConfig, opts ...Option) (*LoadBalancer, *Registry, *fakeClock, chan string) {
	t.Helper()
	clk := newFakeClock()
	cfg.Clock = clk
	lb, reg := newTestLB(t, list, append([]Option{WithOutlierDetection(cfg)}, opts...)...)
	events := make(chan string, 64)
	stop := lb.onEjectionChange(func(s string) {
		select {
		case events <- s:
		default:
		}
	})
	t.Cleanup(stop)
	return lb, reg, clk, events
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

// failN reports n failed calls to the instance at addr.
func failN(t *testing.T, lb *LoadBalancer, ctx context.Context, addr string, n int) {
	t.Helper()
	for sent := 0; sent < n; {
		r, err := lb.routeReq(ctx, "svc")
		require.NoError(t, err)
		for i, in := range r.Instances() {
			if in.Addr() == addr {
				r.Call(i).Done(false)
				sent++
				break
			}
		}
	}
}

func TestEjection_EjectsAndReadmits(t *testing.T) {
	list := mix("svc", nil, nil, nil)
	lb, _, clk, events := ejectionLB(t, list, OutlierConfig{BaseEjectionTime: 10 * time.Second})
	bad := list[1].Addr()
	ctx := context.Background()

	failN(t, lb, ctx, bad, 4)
	got, err := pickedSet(t, lb, ctx, "svc", 30)
	require.NoError(t, err)
	require.Contains(t, got, bad, "4 failures do not eject")

	failN(t, lb, ctx, bad, 1)
	waitRebuild(t, events)
	got, err = pickedSet(t, lb, ctx, "svc", 100)
	require.NoError(t, err)
	require.NotContains(t, got, bad)
	require.Len(t, got, 2)

	clk.Advance(9 * time.Second)
	got, _ = pickedSet(t, lb, ctx, "svc", 30)
	require.NotContains(t, got, bad, "still ejected before its time")
	clk.Advance(time.Second)
	waitRebuild(t, events)
	got, _ = pickedSet(t, lb, ctx, "svc", 30)
	require.Contains(t, got, bad, "readmitted")

	// A second ejection in a row lasts twice as long.
	failN(t, lb, ctx, bad, 5)
	waitRebuild(t, events)
	clk.Advance(19 * time.Second)
	got, _ = pickedSet(t, lb, ctx, "svc", 30)
	require.NotContains(t, got, bad)
	clk.Advance(time.Second)
	waitRebuild(t, events)
	got, _ = pickedSet(t, lb, ctx, "svc", 30)
	require.Contains(t, got, bad)
}

func TestEjection_SuccessResetsTheCount(t *testing.T) {
	list := mix("svc", nil, nil)
	lb, _, _, _ := ejectionLB(t, list, OutlierConfig{ConsecutiveFailures: 3})
	ctx := context.Background()
	r, err := lb.routeReq(ctx, "svc")
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		r.Call(0).Done(false)
		r.Call(0).Done(false)
		r.Call(0).Done(true)
	}
	c := r.Call(0)
	require.False(t, c.Stats().Ejected())
	require.EqualValues(t, 1, c.Stats().InFlight())
	c.Discard()
	require.Zero(t, c.Stats().InFlight())
}

func TestEjection_MaxPercentPerKind(t *testing.T) {
	// Three prod, two gray: 50 % allows one prod (2 of 3 is 67 %); gray
	// has no cap, since prod is its fall-back.
	list := mix("svc", nil, nil, nil, []string{"gray", "true"}, []string{"gray", "true"})
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{})
	prodCtx := context.Background()
	grayCtx := withHeaders(prodCtx, "gray", "true")
	failN(t, lb, prodCtx, list[0].Addr(), 5)
	waitRebuild(t, events)
	failN(t, lb, prodCtx, list[1].Addr(), 5)
	got, _ := pickedSet(t, lb, prodCtx, "svc", 60)
	require.Equal(t, []string{list[1].Addr(), list[2].Addr()}, got, "the second prod ejection exceeds 50 %")

	failN(t, lb, grayCtx, list[3].Addr(), 5)
	waitRebuild(t, events)
	got, _ = pickedSet(t, lb, grayCtx, "svc", 60)
	require.Equal(t, []string{list[4].Addr()}, got)
	failN(t, lb, grayCtx, list[4].Addr(), 5)
	waitRebuild(t, events)
	got, _ = pickedSet(t, lb, grayCtx, "svc", 60)
	require.Equal(t, []string{list[1].Addr(), list[2].Addr()}, got,
		"no cap on gray: both gray instances out, gray falls back to the usable prod ones")
}

func TestEjection_GraySemantics(t *testing.T) {
	// One prod, one gray: each kind may have its only instance ejected.
	list := mix("svc", nil, []string{"gray", "true"})
	var outcomes [4]atomic.Int64
	lb, _, clk, events := ejectionLB(t, list, OutlierConfig{}, WithObserver(func(_ string, _ Kind, o Outcome) { outcomes[o].Add(1) }))
	prodCtx := withHeaders(context.Background(), "gray", "false")
	grayCtx := withHeaders(context.Background(), "gray", "true")
	grayAddr, prodAddr := list[1].Addr(), list[0].Addr()

	failN(t, lb, grayCtx, grayAddr, 5)
	waitRebuild(t, events)
	r, err := lb.routeReq(grayCtx, "svc")
	require.NoError(t, err)
	require.Equal(t, FellBack, r.Outcome, "every gray instance ejected: gray falls back to prod")
	require.Equal(t, Gray, r.Kind)
	require.Equal(t, prodAddr, r.Next().Addr())
	require.Positive(t, outcomes[FellBack].Load())
	got, err := pickedSet(t, lb, prodCtx, "svc", 20)
	require.NoError(t, err)
	require.Equal(t, []string{prodAddr}, got)

	// The prod side ejected too: nothing usable is left, so each kind
	// panics over its own instances (see OutlierConfig.PanicThreshold)
	// rather than fail. Prod never reaches the (ejected) gray.
	failN(t, lb, prodCtx, prodAddr, 5)
	waitRebuild(t, events)
	got, err = pickedSet(t, lb, prodCtx, "svc", 20)
	require.NoError(t, err)
	require.Equal(t, []string{prodAddr}, got)
	got, err = pickedSet(t, lb, grayCtx, "svc", 20)
	require.NoError(t, err)
	require.Equal(t, []string{grayAddr}, got)

	// Readmission of the gray one: gray is served by gray again, prod
	// never gets gray.
	clk.Advance(DefaultBaseEjectionTime)
	waitRebuild(t, events)
	r, err = lb.routeReq(grayCtx, "svc")
	require.NoError(t, err)
	if r.Outcome != Selected { // the prod readmission may have been folded into this rebuild
		t.Fatalf("outcome %v", r.Outcome)
	}
	for i := 0; i < 20; i++ {
		if in, err := lb.Pick(prodCtx, "svc"); err == nil {
			require.Equal(t, prodAddr, in.Addr())
		}
	}
}

func TestEjection_ListChangesKeepAndDropState(t *testing.T) {
	list := mix("svc", nil, nil, nil)
	lb, reg, _, events := ejectionLB(t, list, OutlierConfig{})
	ctx := context.Background()
	failN(t, lb, ctx, list[0].Addr(), 5)
	waitRebuild(t, events)
	// An unrelated change keeps the ejection.
	require.NoError(t, reg.Register(inst("svc", 9100)))
	require.Eventually(t, func() bool {
		got, _ := pickedSet(t, lb, ctx, "svc", 40)
		return len(got) == 3 && got[0] != list[0].Addr()
	}, 5*time.Second, time.Millisecond)
	got, _ := pickedSet(t, lb, ctx, "svc", 60)
	require.NotContains(t, got, list[0].Addr())
	// Deregistered and registered again: a new instance, admitted.
	require.NoError(t, reg.Deregister("svc", list[0].Addr()))
	require.NoError(t, reg.Register(list[0]))
	require.Eventually(t, func() bool {
		got, _ := pickedSet(t, lb, ctx, "svc", 60)
		return len(got) == 4
	}, 5*time.Second, time.Millisecond)
}

func TestEjection_ReportByAddress(t *testing.T) {
	list := mix("svc", nil, nil)
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{ConsecutiveFailures: 2})
	ctx := context.Background()
	_, err := lb.Pick(ctx, "svc")
	require.NoError(t, err)
	lb.report("svc", list[0], false, time.Millisecond)
	lb.report("svc", list[0], false, 0)
	lb.report("nope", list[0], false, 0)                 // unknown service: nothing
	lb.report("svc", inst("svc", 1), false, time.Second) // unknown instance: nothing
	waitRebuild(t, events)
	got, _ := pickedSet(t, lb, ctx, "svc", 30)
	require.Equal(t, []string{list[1].Addr()}, got)
}

func TestEjection_OffKeepsNoStats(t *testing.T) {
	lb, _ := newTestLB(t, mix("svc", nil, nil))
	r, err := lb.routeReq(context.Background(), "svc")
	require.NoError(t, err)
	c := r.Start()
	require.Nil(t, c.Stats())
	c.Done(false) // harmless
	require.Equal(t, "127.0.0.1", c.Instance.Host)
	require.Zero(t, routing{}.Call(0).Instance.Port)
}

// settle waits until the rebuilds scheduled by ejections and readmissions
// have run.
func settle(t *testing.T, lb *LoadBalancer) {
	t.Helper()
	for _, s := range lb.services.Load().all() {
		deadline := time.Now().Add(5 * time.Second)
		for s.pending.Load() {
			if time.Now().After(deadline) {
				t.Fatal("a rebuild stays pending")
			}
			runtime.Gosched()
		}
		s.mu.Lock()
		//lint:ignore SA2001 waiting for a rebuild that took the flag: it holds the lock until it is done
		s.mu.Unlock()
	}
}

// TestProperty_EjectionKeepsGrayInvariants: random lists, random failures
// reported, random clock steps; every pick keeps the gray rule over the
// instances not ejected, and a gray request with no admitted gray instance
// is an observable fall-back.
func TestProperty_EjectionKeepsGrayInvariants(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	for iter := 0; iter < 60; iter++ {
		list := randomList(rng, "svc")
		clk := newFakeClock()
		lb, err := New(&fakeSource{list: list}, WithContextHandler(testHandler),
			WithOutlierDetection(OutlierConfig{ConsecutiveFailures: 1 + rng.IntN(3), MaxEjectionPercent: 1 + rng.IntN(100), Clock: clk}))
		require.NoError(t, err)
		for k := 0; k < 40; k++ {
			v := grayValues[rng.IntN(len(grayValues))]
			ctx := withHeaders(context.Background(), "gray", v)
			r, err := lb.routeReq(ctx, "svc")
			if err != nil {
				require.ErrorIs(t, err, ErrNoInstance, "seed %d", seed)
				if !IsGray(v) {
					// every usable prod instance must be ejected
					for _, in := range usable(list) {
						if !IsGray(in.Metadata["gray"]) {
							st := lb.services.Load().get("svc").health.statsOf(in)
							require.True(t, st != nil && st.Ejected(), "seed %d: prod failed with %s admitted", seed, in.Addr())
						}
					}
				}
				continue
			}
			c := r.Start()
			got := c.Instance
			require.True(t, got.Usable())
			if !IsGray(v) {
				require.False(t, IsGray(got.Metadata["gray"]), "seed %d: prod reached gray %s", seed, got.Addr())
			}
			if IsGray(v) && r.Outcome == Selected {
				require.True(t, IsGray(got.Metadata["gray"]), "seed %d", seed)
			}
			c.Done(rng.IntN(3) != 0)
			if rng.IntN(10) == 0 {
				clk.Advance(time.Duration(rng.IntN(60)) * time.Second)
			}
			settle(t, lb)
		}
		lb.Close()
	}
}

// TestEjection_ChurnUnderRace: picks and results from many goroutines
// while the list churns and instances are ejected and readmitted; prod
// never reaches gray.
func TestEjection_ChurnUnderRace(t *testing.T) {
	reg := NewRegistry()
	for i := 0; i < 6; i++ {
		require.NoError(t, reg.Register(inst("svc", 2000+i, "gray", []string{"true", "false"}[i%2])))
	}
	lb, err := New(reg, WithContextHandler(testHandler), WithCacheOptions(WithEmptyProtection(false)),
		WithOutlierDetection(OutlierConfig{ConsecutiveFailures: 2, BaseEjectionTime: 2 * time.Millisecond, MaxEjectionTime: 10 * time.Millisecond}))
	require.NoError(t, err)
	defer lb.Close()
	var ejections atomic.Int64
	stop := lb.onEjectionChange(func(string) { ejections.Add(1) })
	defer stop()

	deadline := time.Now().Add(400 * time.Millisecond)
	var picks, violations atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ctx := withHeaders(context.Background(), "gray", []string{"true", "false", ""}[g%3])
			reqGray := g%3 == 0
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for time.Now().Before(deadline) {
				r, err := lb.routeReq(ctx, "svc")
				picks.Add(1)
				if err != nil {
					if !errors.Is(err, ErrNoInstance) {
						violations.Add(1)
					}
					continue
				}
				c := r.Start()
				if !reqGray && IsGray(c.Instance.Metadata["gray"]) {
					violations.Add(1)
				}
				c.Done(c.Instance.Port%3 != 0 || rng.IntN(4) == 0) // ports divisible by 3 mostly fail
			}
		}(g)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for time.Now().Before(deadline) {
		port := 2000 + rng.IntN(10)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		switch rng.IntN(3) {
		case 0:
			_ = reg.Register(inst("svc", port, "gray", []string{"true", "false"}[rng.IntN(2)]))
		case 1:
			_ = reg.Deregister("svc", addr)
		case 2:
			_ = reg.SetMetadata("svc", addr, "gray", []string{"true", "false", "junk"}[rng.IntN(3)])
		}
	}
	wg.Wait()
	t.Logf("picks %d, ejection rebuilds %d, violations %d", picks.Load(), ejections.Load(), violations.Load())
	require.Zero(t, violations.Load())
	require.Positive(t, ejections.Load())
}

// Close stops the ejection timers: no readmission (and no OnEjection call)
// after it.
func TestEjection_CloseStopsTimers(t *testing.T) {
	clk := newFakeClock()
	var events atomic.Int64
	lb, _ := newTestLB(t, []Instance{inst("svc", 1), inst("svc", 2)},
		WithOutlierDetection(OutlierConfig{ConsecutiveFailures: 1, Clock: clk, OnEjection: func(Ejection) { events.Add(1) }}))
	r, err := lb.routeReq(context.Background(), "svc")
	require.NoError(t, err)
	r.Call(0).Done(false)
	require.EqualValues(t, 1, events.Load(), "ejected")
	require.NoError(t, lb.Close())
	clk.Advance(time.Hour)
	assert.EqualValues(t, 1, events.Load(), "a readmission ran after Close")
}

// An instance listed twice, its address written two ways, is one machine:
// its failures under either spelling count once, and its ejection keeps
// every spelling out.
func TestEjection_OneMachineUnderEverySpelling(t *testing.T) {
	list := []Instance{NewInstance("svc", "127.0.0.1", 1, nil), NewInstance("svc", "127.0.0.1", 2, nil),
		NewInstance("svc", "::ffff:127.0.0.1", 2, nil), NewInstance("svc", "127.0.0.1", 3, nil)}
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{BaseEjectionTime: 10 * time.Second})
	ctx := context.Background()
	failN(t, lb, ctx, "127.0.0.1:2", 5)
	waitRebuild(t, events)
	for i := 0; i < 40; i++ {
		in, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		require.NotEqual(t, 2, in.Port, "the ejected machine reached as %s", in.Addr())
	}
}

// The report path (package adapter's Balancer.Report), on the path of every call an adapter reports by
// hand, allocates nothing, whatever the instance's host: an IP address, a
// host name (with digits, in either case), IPv6, IPv4-mapped, zoned.
func TestEjection_ReportDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	hosts := []string{"10.0.0.7", "user-svc-0.user-svc.prod.svc.cluster.local", "User-Svc-1.Prod.Example", "host-1",
		"2001:db8::7", "::ffff:10.0.0.8", "fe80::1%eth0"}
	list := make([]Instance, len(hosts))
	for i, h := range hosts {
		list[i] = NewInstance("svc", h, 8080, nil)
	}
	lb, _ := newTestLB(t, list, WithOutlierDetection(OutlierConfig{}))
	_, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	for _, in := range list {
		allocs := testing.AllocsPerRun(500, func() { lb.report("svc", in, true, time.Millisecond) })
		assert.Zero(t, allocs, "allocations per Report for %s", in.Host)
		st := lb.services.Load().get("svc").health.statsOf(in)
		require.NotNil(t, st, "the Stats of %s", in.Host)
		assert.Positive(t, st.Latency(), "the reports reached the Stats of %s", in.Host)
	}
}

// Report finds an instance under any spelling of its address, as the
// ejection compares them: failures reported for ::ffff:127.0.0.1 eject
// the instance listed as 127.0.0.1, and those for HOST-A. the one listed
// as Host-A.
func TestEjection_ReportUnderAnotherSpelling(t *testing.T) {
	for _, tc := range []struct{ listed, reported string }{
		{"127.0.0.1", "::ffff:127.0.0.1"},
		{"Host-A", "HOST-A."},
		{"2001:db8::7", "2001:DB8:0:0:0:0:0:7"},
	} {
		t.Run(tc.listed, func(t *testing.T) {
			list := []Instance{NewInstance("svc", tc.listed, 1, nil), NewInstance("svc", tc.listed, 2, nil)}
			lb, _, _, events := ejectionLB(t, list, OutlierConfig{ConsecutiveFailures: 3, MaxEjectionPercent: 100})
			ctx := context.Background()
			_, err := lb.Pick(ctx, "svc")
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				lb.report("svc", NewInstance("svc", tc.reported, 2, nil), false, 0)
			}
			waitRebuild(t, events)
			for i := 0; i < 20; i++ {
				in, err := lb.Pick(ctx, "svc")
				require.NoError(t, err)
				require.Equal(t, 1, in.Port, "the instance ejected under %s reached as %s", tc.reported, in.Addr())
			}
		})
	}
}
