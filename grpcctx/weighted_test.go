package grpcctx

import (
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBalancer_WeightedFractionalRatio: the picker runs the weighted
// policy over READY connections, so weights 1 : 1.5 split RPCs 2 : 3 (not
// 1 : 2, which would give heavy two thirds).
func TestBalancer_WeightedFractionalRatio(t *testing.T) {
	reg := graylb.NewRegistry()
	heavy := serve(t, reg, "svc", &testServer{name: "heavy"}, nil)
	serve(t, reg, "svc", &testServer{name: "light"}, nil)
	require.NoError(t, reg.Update("svc", heavy.Addr(), func(in *graylb.Instance) { in.Weight = 1.5 }))
	c := dial(t, reg, "svc", graylb.WithPolicy(policy.WeightedRoundRobin()))
	// Both connections READY: both answer.
	seen := map[string]bool{}
	require.Eventually(t, func() bool {
		got, err := call(t, c, "-")
		seen[got] = err == nil
		return seen["heavy"] && seen["light"]
	}, 5*time.Second, 5*time.Millisecond)
	const rpcs = 1000
	counts := map[string]int{}
	for i := 0; i < rpcs; i++ {
		got, err := call(t, c, "-")
		require.NoError(t, err)
		counts[got]++
	}
	// The schedule is 5 slots long; each core's counter and each picker
	// rebuild can leave a partial cycle, a few RPCs off, far from the 67
	// more that 1 : 2 would give.
	t.Logf("of %d RPCs: %v", rpcs, counts)
	assert.InDelta(t, 600, counts["heavy"], 30, "weight 1.5 of 2.5 gets three fifths: %v", counts)
}
