package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var grayValues = []string{"", "true", "TRUE", "True", "false", "FALSE", "junk", " true", "1", "yes"}

func randomList(rng *rand.Rand, service string) []Instance {
	n := rng.IntN(12)
	out := make([]Instance, 0, n)
	for i := 0; i < n; i++ {
		in := inst(service, 1000+i)
		if v := grayValues[rng.IntN(len(grayValues))]; v != "" || rng.IntN(2) == 0 {
			in.Metadata["gray"] = v
		}
		switch rng.IntN(10) {
		case 0:
			in.Healthy = false
		case 1:
			in.Enabled = false
		case 2:
			in.Weight = 0
		case 3:
			in.Weight = rng.Float64()
		}
		out = append(out, in)
	}
	return out
}

// checkPick states the invariants of the gray rule for one pick over list.
func checkPick(list []Instance, reqGray bool, got Instance, err error) error {
	var usableGray, usableProd int
	for _, in := range list {
		if !in.Usable() {
			continue
		}
		if IsGray(in.Metadata["gray"]) {
			usableGray++
		} else {
			usableProd++
		}
	}
	if err != nil {
		if !errors.Is(err, ErrNoInstance) {
			return fmt.Errorf("unexpected error %v", err)
		}
		if reqGray && usableGray+usableProd > 0 || !reqGray && usableProd > 0 {
			return fmt.Errorf("ErrNoInstance with candidates (gray %d prod %d, request gray %v)", usableGray, usableProd, reqGray)
		}
		return nil
	}
	if !got.Usable() {
		return fmt.Errorf("picked unusable %+v", got)
	}
	instGray := IsGray(got.Metadata["gray"])
	if !reqGray && instGray {
		return fmt.Errorf("prod request reached gray instance %s", got.Addr())
	}
	if reqGray && usableGray > 0 && !instGray {
		return fmt.Errorf("gray request reached prod %s while %d gray instances exist", got.Addr(), usableGray)
	}
	return nil
}

func TestProperty_GrayInvariants(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	for iter := 0; iter < 300; iter++ {
		list := randomList(rng, "svc")
		src := &fakeSource{list: list}
		lb, err := New(src, WithContextHandler(testHandler), WithPolicy([]Policy{RoundRobin(), Random(), WeightedRoundRobin()}[iter%3]))
		require.NoError(t, err)
		for k := 0; k < 20; k++ {
			v := grayValues[rng.IntN(len(grayValues))]
			ctx := withHeaders(context.Background(), "gray", v)
			got, err := lb.Pick(ctx, "svc")
			if e := checkPick(list, IsGray(v), got, err); e != nil {
				t.Fatalf("seed %d iter %d value %q: %v\nlist: %+v", seed, iter, v, e, list)
			}
		}
		lb.Close()
	}
}

func TestProperty_ClosedNeverReachesGray(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	for iter := 0; iter < 200; iter++ {
		list := randomList(rng, "svc")
		lb, err := New(&fakeSource{list: list}, WithContextHandler(testHandler),
			WithRules(Rules{Closed: true, GrayUsers: []string{"u"}, CanaryPercent: float64(rng.IntN(101))}))
		require.NoError(t, err)
		for k := 0; k < 10; k++ {
			ctx := withHeaders(context.Background(), "gray", grayValues[rng.IntN(len(grayValues))], "uid", "u")
			got, err := lb.Pick(ctx, "svc")
			if e := checkPick(list, false, got, err); e != nil {
				t.Fatalf("seed %d iter %d: %v", seed, iter, e)
			}
		}
		lb.Close()
	}
}

// TestConcurrentPicksDuringChurn picks from many goroutines while the list
// changes, checking the invariant on every pick against the snapshot the
// pick was served from (the returned Instance carries its metadata).
func TestConcurrentPicksDuringChurn(t *testing.T) {
	reg := NewRegistry()
	for i := 0; i < 6; i++ {
		require.NoError(t, reg.Register(inst("svc", 2000+i, "gray", []string{"true", "false"}[i%2])))
	}
	lb, err := New(reg, WithContextHandler(testHandler), WithCacheOptions(WithEmptyProtection(false)))
	require.NoError(t, err)
	defer lb.Close()

	deadline := time.Now().Add(500 * time.Millisecond)
	var picks, violations, noInst atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ctx := withHeaders(context.Background(), "gray", []string{"true", "false", "", "TRUE"}[g%4])
			reqGray := g%4 == 0 || g%4 == 3
			for time.Now().Before(deadline) {
				r, err := lb.routeReq(ctx, "svc")
				picks.Add(1)
				if err != nil {
					if !errors.Is(err, ErrNoInstance) {
						violations.Add(1)
					}
					noInst.Add(1)
					continue
				}
				in := r.Next()
				if !reqGray && IsGray(in.Metadata["gray"]) {
					violations.Add(1)
				}
				if reqGray && r.Outcome == Selected && !IsGray(in.Metadata["gray"]) {
					violations.Add(1)
				}
			}
		}(g)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	changes := 0
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
		changes++
	}
	wg.Wait()
	t.Logf("picks %d, list changes %d, no-instance %d, violations %d", picks.Load(), changes, noInst.Load(), violations.Load())
	require.Zero(t, violations.Load())
	require.Positive(t, picks.Load())
}
