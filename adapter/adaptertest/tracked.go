package adaptertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/require"
)

// callsTracked: every call an adapter makes is one call of the
// LoadBalancer's, whatever the policy: with outlier detection on and no
// CallObserver, a call counts in flight at its instance while it runs and
// leaves the count when it ends (answered or cancelled), and an answered
// call feeds the instance's latency estimate, which outlier detection and
// latency-aware policies read.
func callsTracked(t *testing.T, d *Driver) {
	for _, p := range []struct {
		name   string
		policy policy.Policy
	}{
		{"RoundRobin", policy.RoundRobin()},
		{"StrictRoundRobin", policy.StrictRoundRobin()},
		{"WeightedRoundRobin", policy.WeightedRoundRobin()},
		{"Random", policy.Random()},
		{"P2C", policy.P2C()},
	} {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, d)
			var hang atomic.Bool
			lb, slb := e.lb(graylb.WithPolicy(p.policy), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1000})), e.lb()
			e.serve(slb, "solo", "prod-solo", nil, ServerOptions{})
			e.serve(slb, "hanging", "gray-hanging", map[string]string{"gray": "true"}, ServerOptions{Hang: &hang})
			solo, hanging := e.dial(lb, "solo"), e.dial(lb, "hanging")
			ready(t, solo, nil, "prod-solo")
			ready(t, hanging, grayKeys, "gray-hanging")
			soloStats, hangStats := statsOf(t, lb, "solo", "false"), statsOf(t, lb, "hanging", "true")

			answer(t, solo, nil)
			waitUntil(t, func() bool { return soloStats.InFlight() == 0 }, "%s under %s: an answered call is still in flight", d.Name, p.name)
			require.Positive(t, soloStats.Latency(), "%s under %s: answered calls fed no latency", d.Name, p.name)

			hang.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			ended := make(chan error, 1)
			go func() { _, err := hanging(ctx, grayKeys); ended <- err }()
			for hangStats.InFlight() != 1 {
				select {
				case err := <-ended:
					t.Fatalf("%s under %s: a call that hangs was never in flight (it ended: %v)", d.Name, p.name, err)
				case <-time.After(time.Millisecond):
				}
			}
			cancel()
			require.Error(t, <-ended)
			waitUntil(t, func() bool { return hangStats.InFlight() == 0 }, "%s under %s: a cancelled call is still in flight", d.Name, p.name)
		})
	}
}

// statsOf returns the Stats lb keeps for service's only instance of the
// kind gray says, read through a call it starts and ends without a result.
func statsOf(t *testing.T, lb *graylb.LoadBalancer, service, gray string) *policy.Stats {
	t.Helper()
	ctx := graylb.WithValue(context.Background(), lb.Keys().Gray, gray)
	r, err := adapter.For(lb).Route(ctx, service, nil)
	require.NoError(t, err)
	c := r.Call(0)
	c.End(adapter.Cancelled)
	require.NotNil(t, c.Stats(), "no Stats kept for %s", service)
	return c.Stats()
}

// waitUntil waits up to callTimeout for cond.
func waitUntil(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(callTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(msg, args...)
		}
		time.Sleep(time.Millisecond)
	}
}
