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
