package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// liveHeapAfterGC returns the heap the garbage collector found live: a
// GC, then what it marked (not what was allocated since it ended, which a
// busy process adds at once).
func liveHeapAfterGC() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// scalePlan is one form of TestScale_FlatHeapUnderChurn.
type scalePlan struct {
	services  int
	perSecond int           // services whose list changes each second
	lasts     time.Duration // the churn's length
	marks     []time.Duration
}

// scalePlans: make test's short form and the long one
// (GRAYLB_SCALE=long, make test-reliability).
var scalePlans = map[string]scalePlan{
	"short": {services: 10_000, perSecond: 200, lasts: 30 * time.Second,
		marks: []time.Duration{6 * time.Second, 15 * time.Second, 30 * time.Second}},
	"long": {services: 100_000, perSecond: 2_000, lasts: 10 * time.Minute,
		marks: []time.Duration{2 * time.Minute, 5 * time.Minute, 10 * time.Minute}},
}

// scaleAddr is the n-th address the churn hands out: never one used
// before, so anything kept per address that left would grow.
// Its port says whether it fails every call (see scaleFailing).
func scaleAddr(n int) (string, int) {
	return fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255), 2000 + n%7 + 7*(n>>24)
}

// scaleFailing: one address in seven fails every call.
func scaleFailing(in *Instance) bool { return (in.Port-2000)%7 == 0 }

// TestScale_FlatHeapUnderChurn: a LoadBalancer that knows many services,
// some of whose lists change every second (an instance replaced by one at
// an address never seen before), while picks run all the time, holds a
// flat heap: the live heap after GC at each mark within 5 % of the others.
// Two LoadBalancers share the registry: one plain, one with a
// VersionFilter and outlier detection, whose picks report results (one
// instance in seven fails every call, and is ejected until it leaves), so
// that the Stats
// and the outlier state per instance are exercised; a pick in a hundred
// is of a name never registered. Every pick is checked against the gray
// rule. What each LoadBalancer holds per service is measured once it
// learned every service (its lists included) and held to the budgets of
// TestFootprint.
//
// make test runs the short form (10 000 services, 200 a second, 30 s);
// GRAYLB_SCALE=long the long one (100 000 services, 2 000 a second, 10
// minutes; make test-reliability).
func TestScale_FlatHeapUnderChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 30 s")
	}
	form := "short"
	if os.Getenv("GRAYLB_SCALE") == "long" {
		form = "long"
	}
	plan := scalePlans[form]

	reg := NewRegistry()
	names := make([]string, plan.services)
	// addrs[s][i]: the address (host, port) of instance i of service s;
	// instance 3 is gray, the others prod, all of version v1 or v2.
	type slot struct {
		host string
		port int
	}
	addrs := make([][4]slot, plan.services)
	next := 0
	md := func(i int) map[string]string {
		m := map[string]string{"version": "v" + strconv.Itoa(1+i%2)}
		if i == 3 {
			m["gray"] = "true"
		}
		return m
	}
	for s := range names {
		names[s] = "svc-" + strconv.Itoa(s)
		for i := range 4 {
			h, p := scaleAddr(next)
			next++
			addrs[s][i] = slot{h, p}
			require.NoError(t, reg.Register(NewInstance(names[s], h, p, md(i))))
		}
	}
	base := liveHeapAfterGC()

	plain, err := New(reg)
	require.NoError(t, err)
	defer plain.Close()
	versioned, err := New(reg, WithFilters(NewVersionFilter()))
	require.NoError(t, err)
	defer versioned.Close()
	// A failing instance stays out until the churn replaces it, so the
	// marks see the same mix of services with an ejected instance (an
	// ejection's end would change it as a wave: the first ejections all
	// come at the start); its timer stops when its address leaves.
	outlier, err := New(reg, WithFilters(NewVersionFilter()),
		WithOutlierDetection(OutlierConfig{BaseEjectionTime: time.Hour, MaxEjectionTime: time.Hour}))
	require.NoError(t, err)
	defer outlier.Close()
	gray := WithValue(WithValue(context.Background(), "gray", "true"), "version", "v1")
	prod := WithValue(WithValue(context.Background(), "gray", "false"), "version", "v1")
	// per[i]: what LoadBalancer i holds a service once it learned every
	// service, each picked once gray and once prod.
	lbs := []*LoadBalancer{plain, versioned, outlier}
	var per [3]uint64
	heap := base
	for i, lb := range lbs {
		for _, name := range names {
			for _, ctx := range []context.Context{gray, prod} {
				_, err := lb.Pick(ctx, name)
				require.NoError(t, err)
			}
		}
		h := liveHeapAfterGC()
		per[i] = (h - heap) / uint64(plan.services)
		heap = h
	}
	// Outlier detection ejects the instances that fail before the churn
	// begins, so that the heap's first mark already holds its state.
	for _, name := range names {
		for range 2 * DefaultConsecutiveFailures {
			for _, ctx := range []context.Context{gray, prod} {
				r, err := outlier.routeReq(ctx, name)
				require.NoError(t, err)
				c := r.Start()
				c.Done(!scaleFailing(&c.Instance))
			}
		}
	}

	var picks, violations, failedPicks, ghosts atomic.Int64
	var first atomic.Value
	violate := func(format string, args ...any) {
		if violations.Add(1) == 1 {
			first.Store(fmt.Sprintf(format, args...))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			for n := 0; ; n++ {
				if n%256 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				if n%100 == 99 { // a name never registered
					if _, err := plain.Pick(prod, "ghost-"+strconv.Itoa(g)+"-"+strconv.Itoa(n)); err == nil {
						violate("a name never registered was picked")
					}
					ghosts.Add(1)
					continue
				}
				name := names[rng.IntN(len(names))]
				isGray := rng.IntN(2) == 0
				ctx := prod
				if isGray {
					ctx = gray
				}
				var in Instance
				var err error
				fellBack := false
				switch n % 3 {
				case 0:
					in, err = plain.Pick(ctx, name)
				case 1:
					in, err = versioned.Pick(ctx, name)
				default:
					var r routing
					if r, err = outlier.routeReq(ctx, name); err == nil {
						c := r.Start()
						in, fellBack = c.Instance, r.Outcome == FellBack
						c.Done(!scaleFailing(&in))
					}
				}
				picks.Add(1)
				switch {
				case err != nil:
					failedPicks.Add(1)
					violate("%s: pick failed with every kind listed: %v", name, err)
				case !isGray && IsGray(in.Metadata["gray"]):
					violate("%s: a prod request reached gray %s", name, in.Addr())
				case isGray && !fellBack && !IsGray(in.Metadata["gray"]):
					violate("%s: a gray request reached prod %s with a gray instance listed", name, in.Addr())
				}
			}
		}()
	}

	// The churn: perSecond services a second, each replacing one of its
	// instances by one at a new address (the new one registered first, so
	// every kind always has an instance).
	rng := rand.New(rand.NewPCG(42, 42))
	changes := 0
	change := func() {
		s := rng.IntN(plan.services)
		i := rng.IntN(4)
		h, p := scaleAddr(next)
		next++
		old := addrs[s][i]
		require.NoError(t, reg.Register(NewInstance(names[s], h, p, md(i))))
		require.NoError(t, reg.Deregister(names[s], old.host+":"+strconv.Itoa(old.port)))
		addrs[s][i] = slot{h, p}
		changes++
	}
	heaps := make([]uint64, 0, len(plan.marks))
	var changesAt []int
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	begin := time.Now()
	every := time.Second / time.Duration(plan.perSecond)
	for _, mark := range plan.marks {
		at := time.NewTimer(time.Until(begin.Add(mark)))
	churn:
		for {
			select {
			case <-tick.C:
			case <-at.C:
				break churn
			}
			// Caught up in bursts when the pickers delay this goroutine.
			// A burst ends at the mark: on a machine too busy to keep up, the
			// rate falls behind (the figures say how far) and the marks keep time.
			for changes < int(time.Since(begin)/every) && time.Since(begin) < mark {
				change()
			}
		}
		heaps = append(heaps, liveHeapAfterGC())
		changesAt = append(changesAt, changes)
		t.Logf("at %v: %d changes, %d picks, live heap %.1f MB", mark, changes, picks.Load(), float64(heaps[len(heaps)-1])/1e6)
	}
	close(stop)
	wg.Wait()

	lo, hi := heaps[0], heaps[0]
	for _, h := range heaps {
		lo, hi = min(lo, h), max(hi, h)
	}
	spread := float64(hi-lo) / float64(lo) * 100
	// What the heap grew by per list change from the first mark to the
	// last: what a leak per address that left would show.
	perChange := (float64(heaps[len(heaps)-1]) - float64(heaps[0])) / float64(changesAt[len(changesAt)-1]-changesAt[0])
	var marks string
	for i, h := range heaps {
		marks += fmt.Sprintf("%s%v %.1f MB", map[bool]string{true: ", "}[i > 0], plan.marks[i], float64(h)/1e6)
	}
	ej := outlier.Ejections()
	reliabilityFragment(t, "scale-churn", fmt.Sprintf(
		"| %s | %d services × 4 instances, %d a second asked (%.0f reached) replacing an instance by one at a new address, for %v (%d list changes); 2 goroutines picking (%d picks, %d of names never registered; %d ejections) | %s (spread %.1f %%; %+.1f B a list change after the first mark) | %d B plain, %d B with a VersionFilter, %d B with outlier detection too | %d |\n",
		form, plan.services, plan.perSecond, float64(changes)/plan.lasts.Seconds(), plan.lasts, changes, picks.Load(), ghosts.Load(), ej.Ejections, marks, spread, perChange, per[0], per[1], per[2], violations.Load()))
	if v := first.Load(); v != nil {
		t.Fatalf("%d violations (%d failed picks); first: %s", violations.Load(), failedPicks.Load(), v)
	}
	require.LessOrEqual(t, spread, 5.0, "live heap after GC at %s", marks)
	if form == "long" { // the short form's changes are too few to tell a few bytes each from noise
		require.LessOrEqual(t, perChange, 16.0, "bytes the heap grew by per list change")
	}
	require.LessOrEqual(t, per[0], uint64(footprintBudgetPlain), "bytes a service, plain")
	require.LessOrEqual(t, per[1], uint64(footprintBudgetVersioned), "bytes a service, with a VersionFilter")
	require.Positive(t, picks.Load())
}

// learnWhile registers n services of 4 instances (one gray) in a fresh
// registry and returns the time per service the first picks of all of
// them took (each picked once gray and once prod), while noise runs on
// goroutines of its own from before the first pick to after the last;
// noise returns once its stop channel is closed.
func learnWhile(t *testing.T, n int, noise func(lb *LoadBalancer, stop <-chan struct{})) time.Duration {
	t.Helper()
	reg := NewRegistry()
	names := make([]string, n)
	for i := range names {
		names[i] = "svc-" + strconv.Itoa(i)
		for p := 0; p < 4; p++ {
			var md []string
			if p == 3 {
				md = []string{"gray", "true"}
			}
			require.NoError(t, reg.Register(inst(names[i], 1000+p, md...)))
		}
	}
	lb, err := New(reg, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if noise != nil {
		wg.Add(1)
		go func() { defer wg.Done(); noise(lb, stop) }()
	}
	gray := withHeaders(context.Background(), "gray", "true")
	prod := context.Background()
	start := time.Now()
	for _, name := range names {
		for _, ctx := range []context.Context{gray, prod} {
			if _, err := lb.Pick(ctx, name); err != nil {
				close(stop)
				wg.Wait()
				t.Fatal(err)
			}
		}
	}
	took := time.Since(start)
	close(stop)
	wg.Wait()
	return took / time.Duration(n)
}

// TestScale_UnknownNamesDoNotSlowLearning: a LoadBalancer learns real
// services at about the same pace while names that are never real are
// picked at once, as fast as a goroutine can (a Transport facing untrusted
// URLs): those picks share the lookups' lock and slots, and the Cache's
// memory of failed names. The time per real service is compared with a
// quiet run's (the best of two of each, taken in turns) and must stay
// within 3× of it: the picker of unknown names takes a core of the two a
// loaded machine may have, and every one of its picks starts a lookup.
func TestScale_UnknownNamesDoNotSlowLearning(t *testing.T) {
	if testing.Short() {
		t.Skip("times thousands of services")
	}
	n := 5_000
	if raceEnabled {
		n = 1_000
	}
	var unknown atomic.Int64
	noisy := func(lb *LoadBalancer, stop <-chan struct{}) {
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := lb.Pick(ctx, "never-"+strconv.Itoa(int(unknown.Add(1)))); err == nil {
				t.Error("a name never registered was picked")
				return
			}
		}
	}
	quiet, loud := time.Duration(1<<63-1), time.Duration(1<<63-1)
	for range 2 {
		quiet = min(quiet, learnWhile(t, n, nil))
		loud = min(loud, learnWhile(t, n, noisy))
	}
	ratio := float64(loud) / float64(quiet)
	text := fmt.Sprintf("learning %d services: %v a service quiet, %v while %d distinct unknown names were picked (%.2f×)", n, quiet, loud, unknown.Load(), ratio)
	t.Log(text)
	reliabilityFragment(t, "scale-unknown", fmt.Sprintf("| %s | %.2f× | 3× |\n", text, ratio))
	require.Less(t, ratio, 3.0, text)
}
