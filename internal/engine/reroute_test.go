package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// triedSet reports the instances whose ports it holds.
func triedSet(ports ...int) func(Instance) bool {
	return func(in Instance) bool {
		for _, p := range ports {
			if in.Port == p {
				return true
			}
		}
		return false
	}
}

func TestReroute_GrayFallsBackOnlyWhenEveryGrayWasTried(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{
		inst("svc", 1), inst("svc", 2),
		inst("svc", 3, "gray", "true"), inst("svc", 4, "gray", "true"),
	})
	var outcomes []Outcome
	lb.observer = func(_ string, _ Kind, o Outcome) { outcomes = append(outcomes, o) }
	ctx := withHeaders(context.Background(), "gray", "true")
	first, err := lb.routeReq(ctx, "svc")
	require.NoError(t, err)
	require.Equal(t, Gray, first.Kind)
	require.Equal(t, Selected, first.Outcome)

	// One gray instance tried: the other gray one.
	rt, err := lb.reroute(ctx, "svc", first, triedSet(3))
	require.NoError(t, err)
	i, ok := rt.NextUntried(triedSet(3))
	require.True(t, ok)
	assert.Equal(t, 4, rt.Instances()[i].Port)
	assert.Equal(t, Selected, rt.Outcome)

	// Both tried: prod, observed as a fall-back.
	outcomes = nil
	rt, err = lb.reroute(ctx, "svc", first, triedSet(3, 4))
	require.NoError(t, err)
	assert.Equal(t, FellBack, rt.Outcome)
	assert.Equal(t, Gray, rt.Kind, "the request is still gray: the next hop routes it gray")
	assert.ElementsMatch(t, []int{1, 2}, ports(rt.Instances()))
	assert.Equal(t, []Outcome{FellBack}, outcomes)

	// Every instance tried: no instance, naming the kind.
	rt, err = lb.reroute(ctx, "svc", first, triedSet(1, 2, 3, 4))
	require.ErrorIs(t, err, ErrNoInstance)
	assert.Contains(t, err.Error(), "gray request")
	assert.Zero(t, rt.Len())
	_, ok = rt.NextUntried(nil)
	assert.False(t, ok)

	// Prod: never gray, however many prod instances were tried.
	pctx := withHeaders(context.Background(), "gray", "false")
	pfirst, err := lb.routeReq(pctx, "svc")
	require.NoError(t, err)
	rt, err = lb.reroute(pctx, "svc", pfirst, triedSet(1))
	require.NoError(t, err)
	i, ok = rt.NextUntried(triedSet(1))
	require.True(t, ok)
	assert.Equal(t, 2, rt.Instances()[i].Port)
	_, err = lb.reroute(pctx, "svc", pfirst, triedSet(1, 2))
	require.ErrorIs(t, err, ErrNoInstance)
	assert.Contains(t, err.Error(), "prod request")
}

// A retry keeps the first decision: a canary draw is not made again.
func TestReroute_KeepsTheDecision(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1), inst("svc", 2), inst("svc", 3, "gray", "true")},
		WithRules(Rules{CanaryPercent: 50}))
	for range 200 {
		first, err := lb.routeReq(context.Background(), "svc")
		require.NoError(t, err)
		tried := triedSet(first.Instances()[0].Port)
		rt, err := lb.reroute(context.Background(), "svc", first, tried)
		if first.Kind == Gray {
			require.NoError(t, err)
			assert.Equal(t, FellBack, rt.Outcome)
			assert.Equal(t, Gray, rt.Kind)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, Prod, rt.Kind)
		for _, in := range rt.Instances() {
			assert.NotEqual(t, 3, in.Port, "a prod request retried onto gray")
		}
	}
}

// With a VersionFilter: a gray request whose gray lane was tried goes to
// the other gray instances (as if the tried one were ejected), and to prod
// only once every gray instance was tried.
func TestReroute_WithFiltersAsIfTriedWereEjected(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{
		inst("svc", 1, "version", "v1"), inst("svc", 2, "version", "v2"),
		inst("svc", 3, "gray", "true", "version", "v2"), inst("svc", 4, "gray", "true", "version", "v3"),
	}, WithFilters(NewVersionFilter()))
	ctx := withHeaders(context.Background(), "gray", "true", "version", "v2")
	first, err := lb.routeReq(ctx, "svc")
	require.NoError(t, err)
	require.Equal(t, []int{3}, ports(first.Instances()))
	rt, err := lb.reroute(ctx, "svc", first, triedSet(3))
	require.NoError(t, err)
	assert.Equal(t, []int{4}, ports(rt.Instances()), "the other gray instance, not prod")
	rt, err = lb.reroute(ctx, "svc", first, triedSet(3, 4))
	require.NoError(t, err)
	assert.Equal(t, []int{2}, ports(rt.Instances()), "prod, in the request's version")
	assert.Equal(t, FellBack, rt.Outcome)
	rt, err = lb.reroute(ctx, "svc", first, triedSet(2, 3, 4))
	require.NoError(t, err)
	assert.Equal(t, []int{1}, ports(rt.Instances()))
}

// Property: a retry's candidates that were not tried are what routing over
// the untried instances gives the request (NewRouter, the reference),
// whatever the list, the rules, the filters and the tried set; prod never
// reaches gray; a gray request reaches prod only with no untried gray
// instance; nothing tried is picked.
func TestReroute_Property(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 3))
	versions := []string{"", "v1", "v2"}
	grays := []string{"true", "false", "", "TRUE", "junk"}
	fastPaths := 0
	for iter := 0; iter < 400; iter++ {
		n := 1 + rng.IntN(7)
		list := make([]Instance, n)
		for i := range list {
			list[i] = inst("svc", 1000+i, "gray", grays[rng.IntN(len(grays))], "version", versions[rng.IntN(len(versions))])
		}
		var rules Rules
		switch rng.IntN(5) {
		case 0:
			rules.Closed = true
		case 1:
			off := false
			rules.Enabled = &off
		case 2:
			rules.GrayAddresses = []string{list[rng.IntN(n)].Addr()}
		}
		opts := []Option{WithRules(rules)}
		if rng.IntN(2) == 0 {
			opts = append(opts, WithFilters(NewVersionFilter()))
		}
		lb, _ := newTestLB(t, list, opts...)
		kind := "false"
		if rng.IntN(2) == 0 {
			kind = "true"
		}
		ctx := withHeaders(context.Background(), "gray", kind, "version", versions[rng.IntN(len(versions))])
		first, err := lb.routeReq(ctx, "svc")
		if err != nil {
			continue
		}
		// Tried: first's candidates (all, or some), plus others at random.
		triedPorts := map[int]bool{}
		for _, in := range first.Instances() {
			if rng.IntN(4) != 0 {
				triedPorts[in.Port] = true
			}
		}
		for _, in := range list {
			if rng.IntN(4) == 0 {
				triedPorts[in.Port] = true
			}
		}
		tried := func(in Instance) bool { return triedPorts[in.Port] }
		desc := fmt.Sprintf("iter %d: list %v, rules %+v, kind %s, tried %v", iter, list, rules, kind, triedPorts)
		rt, err := lb.reroute(ctx, "svc", first, tried)
		if first.hasUntried(tried) {
			require.NoError(t, err, desc)
			assert.Equal(t, ports(first.Instances()), ports(rt.Instances()), desc)
			continue
		}
		var untried []Instance
		for _, in := range list {
			if !tried(in) {
				untried = append(untried, in)
			}
		}
		router, rerr := lb.newRouter("svc", untried, nil)
		require.NoError(t, rerr)
		ref, rerr := router.routeReq(ctx)
		if rerr != nil {
			require.ErrorIs(t, err, ErrNoInstance, desc)
			continue
		}
		require.NoError(t, err, desc)
		assert.Equal(t, ref.Kind, rt.Kind, desc)
		assert.Equal(t, ref.Outcome, rt.Outcome, desc)
		var got []int
		for _, in := range rt.Instances() {
			if !tried(in) {
				got = append(got, in.Port)
			}
		}
		sort.Ints(got)
		want := ports(ref.Instances())
		sort.Ints(want)
		assert.Equal(t, want, got, desc)
		if first.Kind == Gray && first.Outcome == Selected && rt.Outcome == FellBack && !anyTried(lb.services.Load().get("svc").tree.Load().grayLists().prod, tried) {
			fastPaths++ // the prod side as built
		}
		i, ok := rt.NextUntried(tried)
		require.True(t, ok, desc)
		picked := rt.Instances()[i]
		assert.False(t, tried(picked), desc)
		isGray := lb.gray.instanceKind(picked, lb.rules.Load()) == Gray
		if rt.Kind == Prod && (rules.Enabled == nil || *rules.Enabled) {
			assert.False(t, isGray, "prod reached gray: %s", desc)
		}
		if rules.Closed {
			assert.False(t, isGray, "closed, gray reached: %s", desc)
		}
	}
	t.Logf("%d retries served from the prod side as built", fastPaths)
	assert.Positive(t, fastPaths, "the fast path was exercised")
}

// place agrees with decide for every request whose kind decide settles.
func TestPlaceAgreesWithDecide(t *testing.T) {
	for _, rules := range []Rules{{}, {Closed: true}, {Enabled: new(bool)}} {
		for _, list := range [][]Instance{
			{inst("svc", 1)}, {inst("svc", 1), inst("svc", 2, "gray", "true")}, {inst("svc", 2, "gray", "true")},
		} {
			lb, _ := newTestLB(t, list, WithRules(rules))
			_, _ = lb.routeReq(context.Background(), "svc") // adds the service; prod may have no instance
			tr := lb.services.Load().get("svc")
			require.NotNil(t, tr)
			st := tr.tree.Load().gray
			for _, v := range []string{"true", "false"} {
				var r Request
				r.init(withHeaders(context.Background(), "gray", v), "svc", lb.handler, nil)
				i, d := st.decide(&r)
				pi, po := st.place(d.kind)
				assert.Equal(t, i, pi, "rules %+v, gray=%s", rules, v)
				assert.Equal(t, d.outcome, po, "rules %+v, gray=%s", rules, v)
			}
		}
	}
}

func ports(list []Instance) []int {
	out := make([]int, 0, len(list))
	for _, in := range list {
		out = append(out, in.Port)
	}
	return out
}

// A retry never reaches an instance that is gray by the time it is
// routed: when the routing changed since the first route (rules naming a
// new gray address, an instance's metadata turned gray), first's
// candidates are not reused as they are; the retry is routed anew over the
// untried instances, keeping first's decision. While the routing is the
// one first was built from, first's candidates serve the retry.
func TestReroute_RoutingChangedSinceTheFirstRoute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, lb *LoadBalancer, reg *Registry)
	}{
		{"rules name a new gray address", func(t *testing.T, lb *LoadBalancer, _ *Registry) {
			require.NoError(t, lb.SetRules(Rules{GrayAddresses: []string{"127.0.0.1:2"}}))
		}},
		{"an instance turned gray", func(t *testing.T, _ *LoadBalancer, reg *Registry) {
			require.NoError(t, reg.SetMetadata("svc", "127.0.0.1:2", "gray", "true"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, reg := newTestLB(t, []Instance{inst("svc", 1), inst("svc", 2), inst("svc", 3, "gray", "true")})
			ctx := context.Background()
			first, err := lb.routeReq(ctx, "svc")
			require.NoError(t, err)
			require.Equal(t, Prod, first.Kind)
			require.ElementsMatch(t, []int{1, 2}, ports(first.Instances()))

			same, err := lb.reroute(ctx, "svc", first, triedSet(1))
			require.NoError(t, err)
			assert.Equal(t, first, same, "the routing did not change: first's candidates serve the retry")

			tc.change(t, lb, reg)
			rt, err := lb.reroute(ctx, "svc", first, triedSet(1))
			if i, ok := rt.NextUntried(triedSet(1)); ok {
				t.Fatalf("the prod retry reached %s, gray since the first route (err %v)", rt.Instances()[i].Addr(), err)
			}
			require.ErrorIs(t, err, ErrNoInstance, "no prod instance is left untried")
			assert.Contains(t, err.Error(), "prod request")
			assert.Equal(t, Prod, rt.Kind, "first's decision is kept")
		})
	}
}
