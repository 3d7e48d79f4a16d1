package graylb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

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
			if rng.IntN(2) == 0 {
				ctx = WithValue(ctx, grayKey, grayValues[rng.IntN(len(grayValues))])
			}
			if rng.IntN(2) == 0 {
				ctx = WithValue(ctx, versionKey, versions[rng.IntN(len(versions))])
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
