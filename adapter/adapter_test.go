package adapter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/filter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newLB(t *testing.T, opts ...graylb.Option) *graylb.LoadBalancer {
	t.Helper()
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.1", 80, nil)))
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.2", 80, map[string]string{"gray": "true"})))
	lb, err := graylb.New(reg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb
}

func gray(v string) graylb.ContextHandler {
	return graylb.ContextHandlerFunc(func(_ context.Context, name string) string {
		if name == "gray" {
			return v
		}
		return ""
	})
}

func TestForNil(t *testing.T) {
	var b *adapter.Balancer = adapter.For(nil)
	assert.Nil(t, b)
	assert.Equal(t, graylb.DefaultKeys(), b.Keys())
	assert.Nil(t, b.MatchKeys())
	assert.Equal(t, graylb.DefaultVersionKey, b.VersionMetadataKey())
}

// VersionMetadataKey is the metadata key the VersionFilter reads.
func TestVersionMetadataKey(t *testing.T) {
	assert.Equal(t, graylb.DefaultVersionKey, adapter.For(newLB(t)).VersionMetadataKey())
	assert.Equal(t, graylb.DefaultVersionKey, adapter.For(newLB(t, graylb.WithFilters(filter.Version()))).VersionMetadataKey())
	lb := newLB(t, graylb.WithFilters(filter.Version(filter.WithVersionKey("app-version"), filter.WithVersionHeader("x-v"))))
	b := adapter.For(lb)
	assert.Equal(t, "app-version", b.VersionMetadataKey())
	assert.Equal(t, "x-v", b.Keys().Version)
}

// Each step of the surface reaches the LoadBalancer: route, reroute around
// a failed instance, a Router over a list, report, and the decision.
func TestSurface(t *testing.T) {
	lb := newLB(t, graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1}))
	b := adapter.For(lb)
	ctx := context.Background()

	r, err := b.Route(ctx, "svc", gray("true"))
	require.NoError(t, err)
	assert.Equal(t, graylb.Gray, r.Kind)
	assert.Equal(t, adapter.FromKey, r.Source)
	assert.Equal(t, "svc", r.Service)
	require.Equal(t, 1, r.Len())
	c := r.Start()
	assert.Equal(t, "10.0.0.2:80", c.Instance.Addr())
	require.NotNil(t, c.Stats())
	assert.EqualValues(t, 1, c.Stats().InFlight())
	c.End(adapter.OK)
	assert.EqualValues(t, 0, c.Stats().InFlight())

	// A retry after the gray instance failed falls back to prod.
	tried := func(in graylb.Instance) bool { return in.Addr() == "10.0.0.2:80" }
	rr, err := b.Reroute(ctx, r, tried, gray("true"))
	require.NoError(t, err)
	i, ok := rr.NextUntried(tried)
	require.True(t, ok)
	assert.Equal(t, "10.0.0.1:80", rr.Instances()[i].Addr())
	assert.Equal(t, graylb.FellBack, rr.Outcome)

	// A prod request never reaches gray, even over an explicit list.
	router, err := b.NewRouter("svc", []graylb.Instance{graylb.NewInstance("svc", "10.0.0.2", 80, map[string]string{"gray": "true"})})
	require.NoError(t, err)
	_, err = router.Route(ctx, gray("false"))
	assert.True(t, errors.Is(err, graylb.ErrNoInstance), "%v", err)

	// Report feeds outlier detection: one failure ejects (ConsecutiveFailures 1).
	ejected := make(chan string, 4)
	defer b.OnEjectionChange(func(s string) { ejected <- s })()
	b.Report("svc", graylb.NewInstance("svc", "10.0.0.1", 80, nil), false, 0)
	select {
	case s := <-ejected:
		assert.Equal(t, "svc", s)
	default:
		t.Fatal("Report did not eject: OnEjectionChange runs on the reporting goroutine")
	}

	assert.NotNil(t, b.Cache())
	assert.Same(t, lb, b.LoadBalancer())
}

func TestPass(t *testing.T) {
	lb := newLB(t, graylb.WithGrayHeader("x-gray"))
	b := adapter.For(lb)
	for _, tc := range []struct {
		d         adapter.Decision
		untrusted bool
		want      adapter.Pass
	}{
		{adapter.Decision{Kind: graylb.Gray, Source: adapter.FromKey}, false, adapter.Pass{}},
		{adapter.Decision{Kind: graylb.Prod, Source: adapter.FromDefault}, false, adapter.Pass{}},
		{adapter.Decision{Kind: graylb.Prod, Source: adapter.FromDefault}, true, adapter.Pass{GrayKey: "x-gray", Gray: "false"}},
		{adapter.Decision{Kind: graylb.Gray, Source: adapter.FromRules, Lane: "v2"}, false,
			adapter.Pass{GrayKey: "x-gray", Gray: "true", VersionKey: "version", Version: "v2"}},
		{adapter.Decision{Kind: graylb.Gray, Source: adapter.FromContext}, false, adapter.Pass{GrayKey: "x-gray", Gray: "true"}},
	} {
		assert.Equal(t, tc.want, b.Pass(tc.d, tc.untrusted), "%+v untrusted=%v", tc.d, tc.untrusted)
	}
	ctx := graylb.WithValue(context.Background(), "x-gray", "true")
	d := b.Decide(ctx, nil)
	assert.Equal(t, adapter.Decision{Kind: graylb.Gray, Source: adapter.FromContext}, d)
	assert.Equal(t, b.Pass(d, false), b.PassFor(ctx, nil), "PassFor is Pass of Decide")

	// A key the call carries travels: nothing to write, unless untrusted.
	assert.Equal(t, adapter.Pass{}, b.PassFor(context.Background(), gray("true")))
	untrusted := adapter.WithUntrustedCaller(context.Background())
	assert.Equal(t, adapter.Pass{GrayKey: "x-gray", Gray: "false"}, b.PassFor(untrusted, nil))
}

// PassFor writes the lane a match rule chose, under the version key.
func TestPassForLane(t *testing.T) {
	lb := newLB(t, graylb.WithRules(graylb.Rules{Matches: []graylb.Match{{Key: "uid", Exact: "carol", Version: "v2"}}}))
	b := adapter.For(lb)
	uid := graylb.ContextHandlerFunc(func(_ context.Context, name string) string {
		if name == "uid" {
			return "carol"
		}
		return ""
	})
	p := b.PassFor(context.Background(), uid)
	assert.Equal(t, "version", p.VersionKey)
	assert.Equal(t, "v2", p.Version)
	assert.Equal(t, []string{"uid"}, b.MatchKeys())
}

// The surface adds no allocation: routing, starting and reporting a call
// allocate nothing, as the LoadBalancer's own pick does not.
func TestSurfaceAllocatesNothing(t *testing.T) {
	lb := newLB(t, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	b := adapter.For(lb)
	ctx := context.Background()
	h := gray("true")
	_, err := b.Route(ctx, "svc", h)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(200, func() {
		r, _ := b.Route(ctx, "svc", h)
		r.Start().End(adapter.OK)
		_ = b.Pass(r.Decision, false)
	})
	assert.Zero(t, allocs)
}

// For gives one Balancer per LoadBalancer and allocates nothing after the
// first call: a function that takes a LoadBalancer per call (otelgraylb's
// Outgoing) may call it each time.
func TestForIsOnePerLoadBalancer(t *testing.T) {
	lb := newLB(t)
	b := adapter.For(lb)
	require.NotNil(t, b)
	assert.Same(t, b, adapter.For(lb))
	assert.NotSame(t, b, adapter.For(newLB(t)), "each LoadBalancer has its own Balancer")
	allocs := testing.AllocsPerRun(200, func() { _ = adapter.For(lb) })
	assert.Zero(t, allocs)
}

// PassFor decides once: each key the decision needs is read once per call
// (a gRPC adapter pays a copy for each read of outgoing metadata), and the
// kind and the lane it writes come from that one decision.
func TestPassForDecidesOnce(t *testing.T) {
	lb := newLB(t, graylb.WithRules(graylb.Rules{Matches: []graylb.Match{{Key: "uid", Exact: "carol", Version: "v2", Gray: true}}}))
	b := adapter.For(lb)
	reads := map[string]int{}
	uid := graylb.ContextHandlerFunc(func(_ context.Context, name string) string {
		reads[name]++
		if name == "uid" {
			return "carol"
		}
		return ""
	})
	p := b.PassFor(context.Background(), uid)
	assert.Equal(t, adapter.Pass{GrayKey: "gray", Gray: "true", VersionKey: "version", Version: "v2"}, p)
	for name, n := range reads {
		assert.Equal(t, 1, n, "PassFor read %q %d times", name, n)
	}
}

// PassFor writes what Pass writes for Decide's decision, for every mix of
// rules, call keys, context values and trust (the canary at 0 or 100, so
// that one decision is the same as two).
func TestPassForAgreesWithDecide(t *testing.T) {
	rules := []graylb.Rules{
		{},
		{GrayUsers: []string{"alice"}},
		{CanaryPercent: 100},
		{Matches: []graylb.Match{{Key: "uid", Exact: "carol", Version: "v2", Gray: true}, {Key: "uid", Exact: "dave", Version: "v3"}}},
		{GrayUsers: []string{"alice"}, Matches: []graylb.Match{{Key: "uid", Exact: "carol", Version: "v2"}}},
	}
	values := []string{"", "true", "false", "junk"}
	users := []string{"", "alice", "carol", "dave"}
	versions := []string{"", "v9"}
	for ri, rl := range rules {
		lb := newLB(t, graylb.WithRules(rl))
		b := adapter.For(lb)
		for _, g := range values {
			for _, u := range users {
				for _, v := range versions {
					for _, ctxGray := range []string{"", "true"} {
						for _, untrusted := range []bool{false, true} {
							call := graylb.ContextHandlerFunc(func(_ context.Context, name string) string {
								return map[string]string{"gray": g, "uid": u, "version": v}[name]
							})
							ctx := context.Background()
							if ctxGray != "" {
								ctx = graylb.WithValue(ctx, "gray", ctxGray)
							}
							if untrusted {
								ctx = adapter.WithUntrustedCaller(ctx)
							}
							want := b.Pass(b.Decide(ctx, call), untrusted)
							assert.Equal(t, want, b.PassFor(ctx, call), "rules %d gray=%q uid=%q version=%q ctx=%q untrusted=%v", ri, g, u, v, ctxGray, untrusted)
						}
					}
				}
			}
		}
	}
}
