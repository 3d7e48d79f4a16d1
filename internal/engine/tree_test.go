package engine

import (
	"context"
	"fmt"
	"github.com/graylb/graylb/internal/routestate"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTree_FlatPickAgreesWithRoute: over random lists, versions (a few,
// or more than a scan covers), key names, keys set by the handler or the
// context and caller settings, a plain tree's flat pick (every Pick's
// path) picks an instance of the very leaf the general walk (route)
// chooses, with the same kind and outcome.
func TestTree_FlatPickAgreesWithRoute(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	few := []string{"", "v1", "v2", "v3"}
	many := []string{""}
	for i := 0; i < 2*smallVersions; i++ {
		many = append(many, fmt.Sprintf("v%d", i))
	}
	for iter := 0; iter < 400; iter++ {
		versions := few
		if iter%3 == 0 {
			versions = many
		}
		grayKey, versionKey := "gray", "version"
		if iter%2 == 1 {
			grayKey, versionKey = "x-gray-tag", "x-lane"
		}
		list := usable(randomList(rng, "svc"))
		for i := range list {
			if g, ok := list[i].Metadata["gray"]; ok && grayKey != "gray" {
				delete(list[i].Metadata, "gray")
				list[i].Metadata[grayKey] = g
			}
			if v := versions[rng.IntN(len(versions))]; v != "" {
				list[i].Metadata[versionKey] = v
			}
		}
		var filters []ServerFilter
		if rng.IntN(4) > 0 {
			filters = append(filters, NewVersionFilter(WithVersionHeader(versionKey), WithVersionKey(versionKey),
				WithSelfVersion(versions[rng.IntN(len(versions))])))
		}
		gray := defaultGrayFilter()
		gray.header, gray.metaKey = grayKey, grayKey
		tr, err := buildTree("svc", list, &gray, filters, defaultCompiledRules, RoundRobin(), nil)
		require.NoError(t, err)
		require.True(t, tr.plain, "seed %d", seed)
		for req := 0; req < 20; req++ {
			ctx, h := context.Background(), ContextHandler(nil)
			// A key name as the tree holds it, in other memory, or in
			// another letter case (the flat walk compares the first
			// without a call and hands the others to the general one).
			spell := func(k string) string {
				return []string{k, strings.Clone(k), strings.ToUpper(k)}[rng.IntN(3)]
			}
			if rng.IntN(2) == 0 {
				ctx = WithValue(ctx, spell(grayKey), grayValues[rng.IntN(len(grayValues))])
			}
			if rng.IntN(2) == 0 {
				ctx = WithValue(ctx, spell(versionKey), versions[rng.IntN(len(versions))])
			}
			if rng.IntN(3) == 0 { // admitted by a server side, maybe with the canary's draw
				var pairs []routestate.Pair
				if rng.IntN(2) == 0 {
					pairs = append(pairs, routestate.Pair{Name: routestate.Lower(grayKey), Value: grayValues[rng.IntN(len(grayValues))]})
				}
				if rng.IntN(2) == 0 {
					pairs = append(pairs, routestate.Pair{Name: routestate.Lower(versionKey), Value: versions[rng.IntN(len(versions))]})
				}
				st := routestate.New(pairs, false)
				if rng.IntN(2) == 0 {
					st.Draw(rng.IntN(2) == 0)
				}
				ctx = routestate.With(ctx, st)
				if rng.IntN(2) == 0 {
					ctx = WithValue(ctx, "x-other", "1") // the state read through a WithValue context
				}
			}
			if rng.IntN(3) == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Minute) // values below a derived context
				defer cancel()
			}
			if rng.IntN(2) == 0 {
				kv := []string{}
				if rng.IntN(2) == 0 {
					kv = append(kv, grayKey, grayValues[rng.IntN(len(grayValues))])
				}
				if rng.IntN(2) == 0 {
					kv = append(kv, versionKey, versions[rng.IntN(len(versions))])
				}
				ctx, h = withHeaders(ctx, kv...), testHandler
			}
			var r Request
			r.init(ctx, "svc", h, valuesIn(ctx))
			leaf, want := tr.route(&r)
			var kind Kind
			var outcome Outcome
			got, err := tr.pick(ctx, h, func(_ string, k Kind, o Outcome) { kind, outcome = k, o })
			var flat decision
			flatLeaf := tr.leafOf(ctx, nil, h, &flat)
			require.Equal(t, want, flat, "seed %d: the flat walk's decision (source included) is route's", seed)
			require.Equal(t, leaf, flatLeaf, "seed %d", seed)
			require.Equal(t, want.kind, kind, "seed %d", seed)
			require.Equal(t, want.outcome, outcome, "seed %d", seed)
			if leaf == nil {
				require.Nil(t, got, "seed %d", seed)
				require.ErrorIs(t, err, ErrNoInstance, "seed %d", seed)
				continue
			}
			require.NoError(t, err, "seed %d", seed)
			require.True(t, inList(got, leaf.instances), "seed %d: %s is not an instance of route's leaf %v", seed, got.Addr(), leaf.instances)
		}
	}
}

// inList reports whether p points at an element of list itself (not at an
// equal instance elsewhere).
func inList(p *Instance, list []Instance) bool {
	for i := range list {
		if p == &list[i] {
			return true
		}
	}
	return false
}

// TestTree_PlainOnlyWithoutClassifyingRules: rules or filters that the
// flat walk does not implement send every pick through the general walk.
func TestTree_PlainOnlyWithoutClassifyingRules(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2, "gray", "true")}
	gray := defaultGrayFilter()
	rules := func(r Rules) *compiledRules {
		c, err := compileRules(r)
		require.NoError(t, err)
		return c
	}
	off, closed := false, true
	zone := PartitionFilter(200, "zone", func(in Instance) string { return in.Cluster })
	for name, c := range map[string]struct {
		rules   *compiledRules
		filters []ServerFilter
		self    bool
		plain   bool
	}{
		"none":           {rules: defaultCompiledRules, plain: true},
		"version":        {rules: defaultCompiledRules, filters: []ServerFilter{NewVersionFilter()}, plain: true},
		"two versions":   {rules: defaultCompiledRules, filters: []ServerFilter{NewVersionFilter(), NewVersionFilter()}},
		"other filter":   {rules: defaultCompiledRules, filters: []ServerFilter{zone}},
		"gray users":     {rules: rules(Rules{GrayUsers: []string{"u1"}})},
		"canary":         {rules: rules(Rules{CanaryPercent: 5})},
		"match":          {rules: rules(Rules{Matches: []Match{{Key: "region", Exact: "eu", Gray: true}}})},
		"routing off":    {rules: rules(Rules{Enabled: &off})},
		"closed":         {rules: rules(Rules{Closed: closed})},
		"caller is gray": {rules: defaultCompiledRules, self: true},
	} {
		g := gray
		g.selfGray = c.self
		tr, err := buildTree("svc", list, &g, c.filters, c.rules, RoundRobin(), nil)
		require.NoError(t, err)
		require.Equal(t, c.plain, tr.plain, name)
	}
}

// TestTree_EachKindRotatesOverItsOwnLeaf: once no instance is gray (a
// promotion flipped the only gray one to prod, or there never was one),
// prod requests and gray requests (which fall back to every instance)
// route over one list, but each kind keeps a rotation of its own. A
// caller that alternates prod and gray requests (a gateway forwarding
// both, the deploy flows' load) then reaches every instance with each
// kind. A rotation shared by both kinds moves two turns per pair of
// requests: over an even number of instances each kind is locked on half
// of them, and prod requests may never reach the promoted instance.
func TestTree_EachKindRotatesOverItsOwnLeaf(t *testing.T) {
	const n = 4
	policies := []struct {
		name   string
		policy Policy
	}{{"round robin", RoundRobin()}, {"strict round robin", StrictRoundRobin()}, {"weighted round robin", WeightedRoundRobin()}}
	setups := []struct {
		name     string
		opts     []Option
		promoted bool // the last instance starts gray and is flipped to prod
	}{
		{"promotion", nil, true},
		{"no gray instance", nil, false},
		{"promotion, versions", []Option{WithFilters(NewVersionFilter())}, true},
		{"promotion, gray users (no flat walk)", []Option{WithRules(Rules{GrayUsers: []string{"u1"}})}, true},
	}
	for _, p := range policies {
		for _, s := range setups {
			t.Run(p.name+"/"+s.name, func(t *testing.T) {
				reg := NewRegistry()
				for i := 0; i < n; i++ {
					gray := s.promoted && i == n-1
					require.NoError(t, reg.Register(NewInstance("svc", "10.0.0.1", 8000+i, map[string]string{"gray": strconv.FormatBool(gray), "version": "v1"})))
				}
				lb, err := New(reg, append([]Option{WithPolicy(p.policy)}, s.opts...)...)
				require.NoError(t, err)
				defer lb.Close()
				kinds := [2]context.Context{
					Prod: WithValue(context.Background(), "gray", "false"),
					Gray: WithValue(context.Background(), "gray", "true"),
				}
				for _, ctx := range kinds { // routed before the flip
					_, err := lb.Pick(ctx, "svc")
					require.NoError(t, err)
				}
				if s.promoted {
					require.NoError(t, reg.SetMetadata("svc", "10.0.0.1:"+strconv.Itoa(8000+n-1), "gray", "false"))
					st, ok := lb.Snapshot("svc")
					require.True(t, ok)
					require.Equal(t, [2]int{n, 0}, [2]int{st.Prod, st.Gray}, "the flip is routed")
				}
				var reached [2]map[int]int
				for k := range reached {
					reached[k] = map[int]int{}
				}
				for i := 0; i < 4*n; i++ { // gray, prod, gray, prod, ...
					k := Kind(1 - i%2)
					in, err := lb.Pick(kinds[k], "svc")
					require.NoError(t, err)
					reached[k][in.Port]++
				}
				for k := range reached {
					assert.Len(t, reached[k], n, "%v requests, alternating with the other kind, reach every instance: %v", Kind(k), reached[k])
				}
			})
		}
	}
}
