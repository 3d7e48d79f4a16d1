package grpcctx

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/metadata"
)

// A latency-aware policy's Done carries the RPC's start in a pooled
// object: it reports the call, and a pick makes no allocation for it.
func TestTimedDone_ReportsAndIsReused(t *testing.T) {
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", 8080, nil)))
	lb, err := graylb.New(reg, graylb.WithPolicy(policy.P2C()))
	require.NoError(t, err)
	defer lb.Close()
	ab := adapter.For(lb)
	rt, err := ab.Route(context.Background(), "svc", nil)
	require.NoError(t, err)
	p := &picker{}
	call := rt.Call(0)
	require.NotNil(t, call.Stats())
	require.EqualValues(t, 1, call.Stats().InFlight())
	newTimedDone(p, call)(balancer.DoneInfo{})
	assert.EqualValues(t, 0, call.Stats().InFlight(), "Done ended the call")
	assert.Positive(t, call.Stats().Latency(), "and fed its latency")

	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop objects at random")
	}
	allocs := testing.AllocsPerRun(1000, func() { newTimedDone(p, adapter.Call{})(balancer.DoneInfo{}) })
	assert.Zero(t, allocs, "a pick's Done allocates")
}

// The client interceptors write a decision in one allocation on a call
// without outgoing metadata of its own (the decision's metadata is made
// once and shared, see decidedCtx), else in one append (a context and
// three allocations): a canary's kind, or a match rule's kind and lane
// together, plus a copy of the matched value for each of the two reads of
// the rule (metadata hands out copies).
func TestOutgoing_OneAppendPerCall(t *testing.T) {
	for _, c := range []struct {
		name    string
		rules   graylb.Rules
		md      []string
		gray    string
		version string
		allocs  float64
	}{
		{"canary, no metadata of the call's own", graylb.Rules{CanaryPercent: 100}, nil, "true", "", 1},
		{"canary, metadata of the call's own", graylb.Rules{CanaryPercent: 100}, []string{"x-a", "1"}, "true", "", 4},
		{"match rule with a lane", graylb.Rules{Matches: []graylb.Match{{Key: "x-region", Exact: "hz", Gray: true, Version: "v2"}}}, []string{"x-region", "hz"}, "true", "v2", 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", 8080, nil)))
			lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithRules(c.rules))
			require.NoError(t, err)
			defer lb.Close()
			ab := adapter.For(lb)
			d := newDecisions("gray", "version")
			ctx := context.Background()
			if c.md != nil {
				ctx = metadata.AppendToOutgoingContext(ctx, c.md...)
			}
			out := outgoing(ctx, ab, d)
			assert.Equal(t, []string{c.gray}, metadata.ValueFromOutgoingContext(out, "gray"))
			if c.version != "" {
				assert.Equal(t, []string{c.version}, metadata.ValueFromOutgoingContext(out, "version"))
			}
			assert.LessOrEqual(t, testing.AllocsPerRun(200, func() { outgoing(ctx, ab, d) }), c.allocs)
		})
	}
}
