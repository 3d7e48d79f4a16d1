package graylbkratos_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
)

// TestSelectorEveryPolicyTracksCalls: every call a Selector picks is one
// Call whatever the policy: with outlier detection and round robin (no
// latency-aware policy, no CallObserver) it counts in flight until its
// done and feeds its latency, as over graylb's own Transport.
func TestSelectorEveryPolicyTracksCalls(t *testing.T) {
	for _, pol := range []struct {
		name   string
		policy policy.Policy
	}{{"round robin", policy.RoundRobin()}, {"weighted", policy.WeightedRoundRobin()}, {"p2c", policy.P2C()}} {
		t.Run(pol.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			if err := reg.Register(graylb.NewInstance("svc", "127.0.0.1", 9000, map[string]string{"gray": "false"})); err != nil {
				t.Fatal(err)
			}
			lb := newLB(t, reg, graylb.Rules{}, graylb.WithPolicy(pol.policy),
				graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1000}))
			r, err := adapter.For(lb).Route(context.Background(), "svc", nil)
			if err != nil {
				t.Fatal(err)
			}
			probe := r.Call(0)
			st := probe.Stats()
			if st == nil {
				t.Fatal("no Stats kept")
			}
			probe.End(adapter.Cancelled)
			s := newSelector(t, lb)
			s.Apply(nodes("svc", false))
			ctx := callCtx(header{})
			_, done, err := s.Select(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := st.InFlight(); n != 1 {
				t.Fatalf("%d calls in flight during the call", n)
			}
			done(ctx, selector.DoneInfo{})
			if n := st.InFlight(); n != 0 {
				t.Fatalf("%d calls in flight after done", n)
			}
			if st.Latency() <= 0 {
				t.Fatal("the call fed no latency")
			}
			// A failure counts too, and a cancelled call leaves the count.
			_, done, _ = s.Select(ctx)
			done(ctx, selector.DoneInfo{Err: context.Canceled})
			_, done, _ = s.Select(ctx)
			done(ctx, selector.DoneInfo{Err: errors.New("x")})
			if n := st.InFlight(); n != 0 {
				t.Fatalf("%d calls in flight after done", n)
			}
		})
	}
}
