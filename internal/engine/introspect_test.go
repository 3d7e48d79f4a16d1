package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSnapshotSubsets(t *testing.T) {
	lb, reg := newTestLB(t, []Instance{
		inst("svc", 9001, "version", "v1"),
		inst("svc", 9002, "gray", "true", "version", "v2", "note", "<script>x</script>"),
	})
	_, ok := lb.Snapshot("svc")
	require.False(t, ok, "a service never picked is not routed yet")
	_, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.Equal(t, []string{"svc"}, lb.Services())

	st, ok := lb.Snapshot("svc")
	require.True(t, ok)
	require.Equal(t, 1, st.Prod)
	require.Equal(t, 1, st.Gray)
	require.False(t, st.GrayFallback)
	require.Len(t, st.Instances, 2)
	p, g := st.Instances[0], st.Instances[1]
	require.Equal(t, "127.0.0.1:9001", p.Addr)
	require.Equal(t, Prod, p.Kind)
	require.Equal(t, "v1", p.Version)
	require.Equal(t, []string{SubsetProd}, p.Subsets)
	require.True(t, p.Usable)
	require.Nil(t, p.Stats, "no Stats kept")
	require.Equal(t, Gray, g.Kind)
	require.Equal(t, []string{SubsetGray}, g.Subsets)
	require.Equal(t, "<script>x</script>", g.Metadata["note"], "metadata is reported as it is; the page escapes it")

	// The snapshot is a copy: changing it changes nothing.
	g.Metadata["gray"] = "false"
	st2, _ := lb.Snapshot("svc")
	require.Equal(t, "true", st2.Instances[1].Metadata["gray"])

	// No gray instance left: gray requests fall back to every instance.
	require.NoError(t, reg.Deregister("svc", "127.0.0.1:9002"))
	require.Eventually(t, func() bool {
		st, _ := lb.Snapshot("svc")
		return st.Gray == 0
	}, 5*time.Second, time.Millisecond)
	st, _ = lb.Snapshot("svc")
	require.True(t, st.GrayFallback)
	require.Equal(t, []string{SubsetProd, SubsetAll}, st.Instances[0].Subsets)

	// Rules that disable gray routing put every instance in "all"; closed
	// rules leave it empty.
	off := false
	require.NoError(t, lb.SetRules(Rules{Enabled: &off}))
	st, _ = lb.Snapshot("svc")
	require.False(t, st.GrayFallback)
	require.Equal(t, []string{SubsetProd, SubsetAll}, st.Instances[0].Subsets)
	require.NoError(t, lb.SetRules(Rules{Closed: true}))
	st, _ = lb.Snapshot("svc")
	require.Equal(t, []string{SubsetProd}, st.Instances[0].Subsets)

	_, ok = lb.Snapshot("unknown")
	require.False(t, ok)
}

func TestSnapshotGrayAddressAndVersionKey(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 9001, "ver", "v3")},
		WithFilters(NewVersionFilter(WithVersionKey("ver"))),
		WithRules(Rules{GrayAddresses: []string{"127.0.0.1:9001"}}))
	_, err := lb.Pick(withHeaders(context.Background(), "gray", "true"), "svc")
	require.NoError(t, err)
	st, _ := lb.Snapshot("svc")
	require.Equal(t, Gray, st.Instances[0].Kind, "a gray address makes the instance gray")
	require.Equal(t, "v3", st.Instances[0].Version)
}

func TestRulesStateRecordsChangesAndRefusals(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 9001)})
	st := lb.RulesState()
	require.Equal(t, "program", st.Source)
	require.Nil(t, st.Changed)
	require.Zero(t, st.Changes)

	before := time.Now()
	r := Rules{GrayUsers: []string{"alice"}, CanaryPercent: 5}
	require.NoError(t, lb.SetRules(r))
	r.GrayUsers[0] = "mallory" // the caller's slice, changed afterwards
	st = lb.RulesState()
	require.Equal(t, []string{"alice"}, st.Rules.GrayUsers)
	require.Equal(t, 5.0, st.Rules.CanaryPercent)
	require.False(t, st.Changed.Before(before))
	*st.Changed = time.Time{} // a copy: changing it changes nothing
	require.False(t, lb.RulesState().Changed.IsZero())
	require.Equal(t, uint64(1), st.Changes)

	err := lb.SetRules(Rules{CanaryPercent: 101})
	require.ErrorIs(t, err, ErrInvalidRules)
	st = lb.RulesState()
	require.Equal(t, uint64(1), st.Refused)
	require.Equal(t, err.Error(), st.LastRefusedError)
	require.NotNil(t, st.LastRefusedRules)
	require.Equal(t, 101.0, st.LastRefusedRules.CanaryPercent)
	require.Equal(t, []string{"alice"}, st.Rules.GrayUsers, "the previous rules stay in force")
	require.NotNil(t, st.LastRefused)
}

func TestRulesStateRacesWithSetRules(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 9001)})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				_ = lb.SetRules(Rules{CanaryPercent: float64(i)})
				_ = lb.RulesState()
				_, _ = lb.Snapshot("svc")
			}
		}(i)
	}
	wg.Wait()
	// The recorded rules are the rules in force.
	st := lb.RulesState()
	require.Equal(t, uint64(200), st.Changes)
	want, err := compileRules(st.Rules)
	require.NoError(t, err)
	require.Equal(t, want.canary, lb.rules.Load().canary)
}

func TestSnapshotOfServiceTheCacheFollows(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("grpc-svc", 9001), inst("grpc-svc", 9002, "gray", "true")})
	// An adapter that routes on its own (the gRPC resolver) follows the
	// Cache without picking through the LoadBalancer.
	_, err := lb.cache.Instances(context.Background(), "grpc-svc")
	require.NoError(t, err)
	require.Equal(t, []string{"grpc-svc"}, lb.Services())
	st, ok := lb.Snapshot("grpc-svc")
	require.True(t, ok)
	require.Equal(t, 1, st.Prod)
	require.Equal(t, 1, st.Gray)
	_, err = lb.cache.Instances(context.Background(), "missing")
	require.Error(t, err)
	require.Equal(t, []string{"grpc-svc"}, lb.Services(), "a failed first query is not a routed service")
}

// describedSource is a user's rule source that describes itself.
type describedSource struct {
	staticSource
	text string
}

func (d describedSource) Describe() string { return d.text }

// stringSource is a user's rule source whose String shows its whole
// configuration: not meant for an operator's page.
type stringSource struct{ staticSource }

func (stringSource) String() string { return "rules at https://admin:s3cret@config.internal/rules" }

// The rules' source is shown as an operator recognises it: what the
// source says of itself (Describe), else its Go type; never its String,
// which is not a promise to hold no credentials.
func TestRulesStateSourceDescribed(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  RuleSource
		want string
	}{
		{"described", describedSource{text: "rules from the inventory service"}, "rules from the inventory service"},
		{"empty description: the type", describedSource{}, "engine.describedSource"},
		{"markup, shown as text", describedSource{text: "<b>x</b>"}, "<b>x</b>"},
		{"a long description, cut", describedSource{text: strings.Repeat("x", 5000)}, strings.Repeat("x", 512) + "..."},
		{"no description: the type", staticSource{}, "engine.staticSource"},
		{"a String is not a description", stringSource{}, "engine.stringSource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, _ := newTestLB(t, []Instance{inst("svc", 1)}, WithRuleSource(tc.src))
			require.Equal(t, tc.want, lb.RulesState().Source)
		})
	}
}

// The Cache's applied counter counts each service's first list: a page
// that says "updates applied 0" while instances are live misleads.
func TestCacheStatsCountTheFirstList(t *testing.T) {
	lb, reg := newTestLB(t, []Instance{inst("a", 1), inst("b", 2)})
	ctx := context.Background()
	require.Zero(t, lb.cache.Stats().Applied)
	_, err := lb.Pick(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, uint64(1), lb.cache.Stats().Applied, "the first list of a")
	_, err = lb.Pick(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, uint64(2), lb.cache.Stats().Applied)
	require.NoError(t, reg.Register(inst("a", 3)))
	require.Eventually(t, func() bool { return lb.cache.Stats().Applied == 3 }, 5*time.Second, time.Millisecond, "an update")
	// A name with no instance installs no list.
	_, err = lb.Pick(ctx, "nobody")
	require.Error(t, err)
	require.Equal(t, uint64(3), lb.cache.Stats().Applied)
}
