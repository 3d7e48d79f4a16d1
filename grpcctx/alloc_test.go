package grpcctx

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
)

// An RPC's Done carries its Call in a pooled object: it ends the call,
// and a pick makes no allocation for it.
func TestCallDone_EndsTheCallAndIsReused(t *testing.T) {
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
	newCallDone(p, call, context.Background())(balancer.DoneInfo{})
	assert.EqualValues(t, 0, call.Stats().InFlight(), "Done ended the call")
	assert.Positive(t, call.Stats().Latency(), "and fed its latency")

	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop objects at random")
	}
	allocs := testing.AllocsPerRun(1000, func() { newCallDone(p, adapter.Call{}, context.Background())(balancer.DoneInfo{}) })
	assert.Zero(t, allocs, "a pick's Done allocates")
}

// fakeSubConn is a SubConn a picker hands out and nothing calls.
type fakeSubConn struct{ balancer.SubConn }

// A pick and its Done allocate nothing on a stable list, whatever the
// policy, with outlier detection and a CallObserver on or off.
func TestPicker_PickAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop objects at random")
	}
	for _, c := range []struct {
		name string
		opts []graylb.Option
	}{
		{"round robin", nil},
		{"round robin, outlier detection", []graylb.Option{graylb.WithOutlierDetection(graylb.OutlierConfig{})}},
		{"weighted, outlier detection", []graylb.Option{graylb.WithPolicy(policy.WeightedRoundRobin()), graylb.WithOutlierDetection(graylb.OutlierConfig{})}},
		{"p2c", []graylb.Option{graylb.WithPolicy(policy.P2C())}},
		{"call observer", []graylb.Option{graylb.WithCallObserver(func(string, graylb.Instance, graylb.Kind, bool, time.Duration) {})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The registry lb reads holds the instances: lb keeps their
			// Stats (outlier detection, P2C), so every variant but plain
			// round robin ends its calls through Done.
			reg := graylb.NewRegistry()
			var list []adapter.Endpoint[endpoint]
			for i := range 10 {
				md := map[string]string{"gray": strconv.FormatBool(i%3 == 0)}
				in := graylb.NewInstance("svc", "10.0.0.1", 8000+i, md)
				require.NoError(t, reg.Register(in))
				list = append(list, adapter.Endpoint[endpoint]{Instance: in,
					Handle: endpoint{sc: &fakeSubConn{}, state: connectivity.Ready}})
			}
			lb, err := graylb.New(reg, c.opts...)
			require.NoError(t, err)
			defer lb.Close()
			e, err := adapter.NewEndpoints(adapter.For(lb), "svc", list, ready)
			require.NoError(t, err)
			rt, err := e.Route(context.Background(), nil)
			require.NoError(t, err)
			probe := rt.Call(0)
			probe.End(adapter.Cancelled)
			require.Equal(t, c.opts != nil, probe.Tracked(), "calls tracked")
			p := &picker{service: "svc", failures: defaultFailureCodes}
			p.live.Store(e)
			p.all.Store(e)
			// A gray request by a context value: reading outgoing metadata
			// copies its values (grpc-go's, see TestHandler).
			info := balancer.PickInfo{Ctx: graylb.WithValue(context.Background(), "gray", "true")}
			allocs := testing.AllocsPerRun(200, func() {
				res, err := p.Pick(info)
				if err != nil {
					t.Fatal(err)
				}
				if res.Done != nil {
					res.Done(balancer.DoneInfo{})
				}
			})
			assert.Zero(t, allocs)
		})
	}
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
