package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reliabilityFragment appends a markdown fragment to the folder named by
// GRAYLB_RELIABILITY_OUT (make test-reliability gathers them into
// RELIABILITY.md); without it the figures only go to the test log.
func reliabilityFragment(t *testing.T, name, text string) {
	t.Log(text)
	dir := os.Getenv("GRAYLB_RELIABILITY_OUT")
	if dir == "" {
		return
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644))
}

// TestChurn picks from many goroutines while the list changes about 100
// times a second (instances added, removed, flipped gray/prod/junk, weights
// changed, 0 included) and checks the gray rule on every pick against the
// snapshot it was served from. One prod instance never changes, so every
// pick has a candidate: any error is a failure. GRAYLB_CHURN_DURATION sets
// the duration (make test: 2s; make test-reliability: 30s).
func TestChurn(t *testing.T) {
	d := 2 * time.Second
	if v := os.Getenv("GRAYLB_CHURN_DURATION"); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err)
	}
	before := runtime.NumGoroutine()
	reg := NewRegistry()
	anchor := inst("svc", 4000)
	require.NoError(t, reg.Register(anchor))
	policies := []Policy{RoundRobin(), Random(), WeightedRoundRobin(), StrictRoundRobin()}
	lbs := make([]*LoadBalancer, len(policies))
	for i, p := range policies {
		lb, err := New(reg, WithContextHandler(testHandler), WithPolicy(p), WithFilters(NewVersionFilter()),
			WithCacheOptions(WithEmptyProtection(false)))
		require.NoError(t, err)
		_, err = lb.Pick(context.Background(), "svc")
		require.NoError(t, err)
		lbs[i] = lb
	}

	var picks, violations, errs atomic.Int64
	var firstViolation atomic.Value
	violate := func(format string, args ...any) {
		if violations.Add(1) == 1 {
			firstViolation.Store(fmt.Sprintf(format, args...))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	values := []string{"true", "false", "", "TRUE", "junk", " true"}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := values[rng.IntN(len(values))]
				ctx := withHeaders(context.Background(), "gray", v, "version", []string{"", "v1", "v2"}[rng.IntN(3)])
				lb := lbs[rng.IntN(len(lbs))]
				r, err := lb.routeReq(ctx, "svc")
				picks.Add(1)
				if err != nil {
					errs.Add(1)
					violate("pick failed with a prod instance always present: %v", err)
					continue
				}
				in := r.Next()
				gray := IsGray(in.Metadata["gray"])
				switch {
				case !in.Usable():
					violate("picked unusable %s %+v", in.Addr(), in)
				case !IsGray(v) && gray:
					violate("prod request (%q) reached gray %s", v, in.Addr())
				case IsGray(v) && r.Outcome == Selected && !gray:
					violate("gray request selected prod %s", in.Addr())
				case IsGray(v) && r.Outcome == FellBack && gray:
					violate("gray request fell back yet got gray %s", in.Addr())
				}
			}
		}(g)
	}

	rng := rand.New(rand.NewPCG(42, 42))
	changes := 0
	change := func() {
		port := 4001 + rng.IntN(20)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		var err error
		switch rng.IntN(4) {
		case 0:
			in := inst("svc", port, "gray", []string{"true", "false", "TRUE", "junk"}[rng.IntN(4)], "version", []string{"", "v1", "v2"}[rng.IntN(3)])
			in.Weight = []float64{0, 0.2, 1, 3}[rng.IntN(4)]
			err = reg.Register(in)
		case 1:
			err = reg.Deregister("svc", addr)
		case 2:
			err = reg.SetMetadata("svc", addr, "gray", []string{"true", "false", "junk", ""}[rng.IntN(4)])
		case 3:
			err = reg.Update("svc", addr, func(i *Instance) { i.Weight = rng.Float64() * 2 })
		}
		if err != nil && !errors.Is(err, ErrInvalidInstance) { // removing or updating an absent address
			t.Fatal(err)
		}
		changes++
	}
	// About 100 changes a second, for d: caught up in bursts when the busy
	// pickers delay this goroutine.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	begin := time.Now()
	end := time.After(d)
churn:
	for {
		select {
		case <-tick.C:
		case <-end:
			break churn
		}
		for changes < int(time.Since(begin)/(10*time.Millisecond)) {
			change()
		}
	}
	close(stop)
	wg.Wait()
	for _, lb := range lbs {
		require.NoError(t, lb.Close())
	}
	// The LoadBalancers' goroutines end on their own after Close: polled
	// for a second, here (a goroutine polling would count itself).
	after := runtime.NumGoroutine()
	for giveUp, over := time.After(time.Second), false; after > before && !over; after = runtime.NumGoroutine() {
		select {
		case <-tick.C:
		case <-giveUp:
			over = true
		}
	}
	leaks := max(0, after-before)
	reliabilityFragment(t, "churn", fmt.Sprintf(
		"| churn: in-memory registry, 8 picking goroutines, 4 policies, -race | %v | %d list changes (%.0f/s) | %d | %d errors | %d | %d goroutines leaked |\n",
		d, changes, float64(changes)/d.Seconds(), picks.Load(), errs.Load(), violations.Load(), leaks))
	if v := firstViolation.Load(); v != nil {
		t.Fatalf("%d violations; first: %s", violations.Load(), v)
	}
	require.Zero(t, leaks, "goroutines before %d, after %d", before, after)
	require.Positive(t, picks.Load())
}
