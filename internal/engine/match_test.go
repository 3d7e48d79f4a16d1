package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const matchDoc = `{"matches":[
	{"key":"x-region","exact":"hz","gray":true},
	{"key":"x-lane","exact":"feat-42","version":"feat-42"},
	{"key":"x-tenant","prefix":"beta-","gray":true,"version":"v2"},
	{"key":"x-build","regex":"^2024\\.[0-9]+$","gray":true},
	{"key":"x-debug","present":true,"version":"debug"}
]}`

func TestParseRules_Matches(t *testing.T) {
	r, err := ParseRules([]byte(matchDoc))
	require.NoError(t, err)
	require.Len(t, r.Matches, 5)
	require.Equal(t, Match{Key: "x-tenant", Prefix: "beta-", Gray: true, Version: "v2"}, r.Matches[2])
	c, err := compileRules(r)
	require.NoError(t, err)
	require.Equal(t, []string{"x-region", "x-lane", "x-tenant", "x-build", "x-debug"}, c.matchKeys)
}

func TestParseRules_RefusesBadMatches(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"matches":{"key":"a"}}`, "not a JSON array"},
		{`{"matches":[1]}`, "matches[0]: not a JSON object"},
		{`{"matches":["x"]}`, "matches[0]: not a JSON object"},
		{`{"matches":[{"key":"a","exact":"b","gray":true,"nope":1}]}`, `matches[0]: unknown key "nope"`},
		{`{"matches":[{"Key":"a","exact":"b","gray":true}]}`, `matches[0]: unknown key "Key"`},
		{`{"matches":[{"key":"a","exact":"b","Gray":true}]}`, `unknown key "Gray"`},
		{`{"matches":[{"key":"a","exact":"b","gray":true,"gray":false}]}`, `key "gray" appears twice`},
		{`{"matches":[{"key":"a","exact":"b","gray":true},{"key":"a","key":"c","exact":"b","gray":true}]}`, `matches[1]: key "key" appears twice`},
		{`{"matches":[{"key":"a","exact":null,"gray":true}]}`, `key "exact" is null`},
		{`{"matches":[null]}`, "matches[0]: not a JSON object"},
		{`{"matches":[{"key":"a","regex":"(","gray":true}]}`, `regex "("`},
		{`{"matches":[{"key":"a","regex":"a{2000}","gray":true}]}`, `regex "a{2000}"`},
		{`{"matches":[{"key":"a","gray":true}]}`, "no condition"},
		{`{"matches":[{"key":"a","exact":"b","prefix":"c","gray":true}]}`, "2 conditions"},
		{`{"matches":[{"key":"a","exact":"b"}]}`, "no effect"},
		{`{"matches":[{"key":"a","exact":"b","gray":false,"version":""}]}`, "no effect"},
		{`{"matches":[{"exact":"b","gray":true}]}`, "empty"},
		{`{"matches":[{"key":"a b","exact":"b","gray":true}]}`, "not a header name"},
		{`{"matches":[{"key":"a:b","exact":"b","gray":true}]}`, "not a header name"},
		{`{"matches":[{"key":"a\n","exact":"b","gray":true}]}`, "not a header name"},
		{`{"matches":[{"key":"a","exact":"b","version":"v 1"}]}`, "not visible ASCII"},
		{`{"matches":[{"key":"a","exact":"b","version":"v\r\nx: y"}]}`, "not visible ASCII"},
		{`{"matches":[{"key":"a","exact":"b","version":"é"}]}`, "not visible ASCII"},
		{`{"matches":[{"key":"a","exact":"b","gray":"true"}]}`, "cannot unmarshal"},
		{`{"matches":[{"key":"` + strings.Repeat("k", MaxMatchKeyLen+1) + `","exact":"b","gray":true}]}`, "at most"},
		{`{"matches":[{"key":"a","regex":"` + strings.Repeat("a", MaxRegexLen+1) + `","gray":true}]}`, "at most"},
	} {
		_, err := ParseRules([]byte(tc.doc))
		require.ErrorIs(t, err, ErrInvalidRules, tc.doc)
		require.ErrorContains(t, err, tc.want, tc.doc)
	}
	many := make([]Match, MaxMatches+1)
	for i := range many {
		many[i] = Match{Key: "k", Present: true, Gray: true}
	}
	require.ErrorContains(t, Rules{Matches: many}.Validate(), "at most")
}

func TestSetRules_BadRegexKeepsPrevious(t *testing.T) {
	lb, _ := newTestLB(t, mix("svc", nil, []string{"gray", "true"}))
	good, err := ParseRules([]byte(matchDoc))
	require.NoError(t, err)
	require.NoError(t, lb.SetRules(good))
	err = lb.SetRules(Rules{Matches: []Match{{Key: "x-region", Regex: "[", Gray: true}}})
	require.ErrorIs(t, err, ErrInvalidRules)
	require.ErrorContains(t, err, `matches[0]: key "x-region": regex "["`)
	r, err := lb.routeReq(withHeaders(context.Background(), "x-region", "hz"), "svc")
	require.NoError(t, err)
	require.Equal(t, Gray, r.Kind, "the previous rules stay in force")
}

// laneList: prod and gray, each with feat-42, v2 and unversioned instances.
func laneList() []Instance {
	return []Instance{
		inst("svc", 1, "gray", "false"),
		inst("svc", 2, "gray", "false", "version", "feat-42"),
		inst("svc", 3, "gray", "true"),
		inst("svc", 4, "gray", "true", "version", "v2"),
	}
}

func TestMatch_Routing(t *testing.T) {
	rules, err := ParseRules([]byte(matchDoc))
	require.NoError(t, err)
	rules.CanaryPercent = 100 // every undecided, unmatched request goes gray
	lb, _ := newTestLB(t, laneList(), WithFilters(NewVersionFilter()), WithRules(rules))
	for _, tc := range []struct {
		name    string
		hdr     []string
		kind    Kind
		lane    string
		want    []string
		outcome Outcome
	}{
		{"region hz is gray", []string{"x-region", "hz"}, Gray, "", []string{"127.0.0.1:3"}, Selected},
		{"region hz, gray false opts out", []string{"x-region", "hz", "gray", "false"}, Prod, "", []string{"127.0.0.1:1"}, Selected},
		{"region hz, gray junk opts out", []string{"x-region", "hz", "gray", "junk"}, Prod, "", []string{"127.0.0.1:1"}, Selected},
		{"region HZ is not hz", []string{"x-region", "HZ"}, Gray, "", []string{"127.0.0.1:3"}, Selected}, // the canary (100 %)
		{"lane feat-42: prod, its lane, not drawn by the canary", []string{"x-lane", "feat-42"}, Prod, "feat-42", []string{"127.0.0.1:2"}, Selected},
		{"lane feat-42, explicit version wins", []string{"x-lane", "feat-42", "version", "none"}, Prod, "feat-42", []string{"127.0.0.1:1"}, Selected},
		{"tenant prefix: gray lane v2", []string{"x-tenant", "beta-7"}, Gray, "v2", []string{"127.0.0.1:4"}, Selected},
		{"build regex", []string{"x-build", "2024.17"}, Gray, "", []string{"127.0.0.1:3"}, Selected},
		{"build regex, not anchored text", []string{"x-build", "x2024.17", "gray", "false"}, Prod, "", []string{"127.0.0.1:1"}, Selected},
		{"present debug: prod lane debug falls back to unversioned", []string{"x-debug", "1"}, Prod, "debug", []string{"127.0.0.1:1"}, Selected},
		{"first match wins", []string{"x-debug", "1", "x-region", "hz"}, Gray, "", []string{"127.0.0.1:3"}, Selected},
		{"empty value is absent", []string{"x-debug", "", "gray", "false"}, Prod, "", []string{"127.0.0.1:1"}, Selected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := withHeaders(context.Background(), tc.hdr...)
			r, err := lb.routeReq(ctx, "svc")
			require.NoError(t, err)
			require.Equal(t, tc.kind, r.Kind)
			require.Equal(t, tc.lane, r.Lane)
			require.Equal(t, tc.outcome, r.Outcome)
			got, err := pickedSet(t, lb, ctx, "svc", 20)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMatch_GrayFallsBackWhenNoGray(t *testing.T) {
	lb, _ := newTestLB(t, mix("svc", nil, nil), WithRules(Rules{Matches: []Match{{Key: "x-region", Exact: "hz", Gray: true}}}))
	r, err := lb.routeReq(withHeaders(context.Background(), "x-region", "hz"), "svc")
	require.NoError(t, err)
	require.Equal(t, Gray, r.Kind)
	require.Equal(t, FellBack, r.Outcome)
}

func TestMatch_ClosedAndSelfGray(t *testing.T) {
	m := []Match{{Key: "x-region", Exact: "hz", Gray: true, Version: "v2"}}
	lb, _ := newTestLB(t, laneList(), WithRules(Rules{Closed: true, Matches: m}))
	got, err := pickedSet(t, lb, withHeaders(context.Background(), "x-region", "hz"), "svc", 20)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2"}, got, "closed: a matched request stays on prod")
	// A gray caller chose the side: matches do not run.
	lb2, _ := newTestLB(t, laneList(), WithSelfGray(true), WithRules(Rules{Matches: []Match{{Key: "x-region", Exact: "hz", Version: "feat-42"}}}))
	r, err := lb2.routeReq(withHeaders(context.Background(), "x-region", "hz"), "svc")
	require.NoError(t, err)
	require.Equal(t, Gray, r.Kind)
	require.Empty(t, r.Lane)
}

func TestMatch_KeysAndPass(t *testing.T) {
	lb, _ := newTestLB(t, laneList(), WithFilters(NewVersionFilter(WithVersionHeader("x-version"))))
	require.Empty(t, lb.matchKeys())
	require.NoError(t, lb.SetRules(Rules{Matches: []Match{
		{Key: "X-Region", Exact: "hz", Gray: true},
		{Key: "x-lane", Exact: "feat-42", Version: "feat-42"},
		{Key: "x-region", Present: true, Version: "v9"},
		{Key: "uid", Exact: "alice", Gray: true},
	}}))
	require.Equal(t, []string{"x-region", "x-lane", "uid"}, lb.matchKeys())
	require.Equal(t, []string{"gray", "uid", "x-version", "x-region", "x-lane"}, lb.Keys().Names())

	ctx := withHeaders(context.Background(), "x-region", "hz")
	d := lb.decide(ctx, nil)
	require.Equal(t, Decision{Kind: Gray, Source: FromRules}, d, "a match decided")

	ctx = withHeaders(context.Background(), "x-lane", "feat-42")
	require.Equal(t, Decision{Kind: Prod, Source: FromRules, Lane: "feat-42"}, lb.decide(ctx, nil))
	require.Empty(t, lb.decide(withHeaders(context.Background(), "x-lane", "feat-42", "x-version", "v1"), nil).Lane, "the call carries its own version")
	require.Empty(t, lb.decide(withHeaders(context.Background(), "x-lane", "feat-42", "gray", "false"), nil).Lane, "the side was chosen")

	require.Equal(t, Gray, lb.decide(withHeaders(context.Background(), "uid", "alice"), nil).Kind, "the user id is a key like any other")

	require.NoError(t, lb.SetRules(Rules{}))
	require.Empty(t, lb.matchKeys())
	require.Empty(t, lb.decide(ctx, nil).Lane)
	var nilLB *LoadBalancer
	require.Empty(t, nilLB.matchKeys())
}

func TestMatch_PickDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	rules, err := ParseRules([]byte(matchDoc))
	require.NoError(t, err)
	lb, _ := newTestLB(t, laneList(), WithFilters(NewVersionFilter()), WithRules(rules))
	for _, hdr := range [][]string{{"x-region", "hz"}, {"x-lane", "feat-42"}, {"x-tenant", "beta-1"}, {"x-build", "2024.5"}, {"x-debug", "y"}, {"x-none", "1"}} {
		ctx := withHeaders(context.Background(), hdr...)
		_, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		allocs := testing.AllocsPerRun(200, func() { _, _ = lb.Pick(ctx, "svc") })
		require.Zero(t, allocs, "%v", hdr)
	}
}

// TestProperty_MatchesKeepGrayInvariants: random lists, random match
// rules, random request keys: a request that says prod (any value but
// "true" in its gray key) never reaches gray; one a match made gray
// reaches gray whenever a gray instance exists.
func TestProperty_MatchesKeepGrayInvariants(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 11))
	keys := []string{"x-a", "x-b", "uid"}
	vals := []string{"", "a", "ab", "b", "abc"}
	for iter := 0; iter < 150; iter++ {
		list := randomList(rng, "svc")
		var ms []Match
		for j := rng.IntN(4); j > 0; j-- {
			m := Match{Key: keys[rng.IntN(len(keys))], Gray: rng.IntN(2) == 0}
			switch rng.IntN(4) {
			case 0:
				m.Exact = vals[1+rng.IntN(4)]
			case 1:
				m.Prefix = vals[1+rng.IntN(4)]
			case 2:
				m.Regex = "^a"
			default:
				m.Present = true
			}
			if !m.Gray || rng.IntN(2) == 0 {
				m.Version = "v1"
			}
			ms = append(ms, m)
		}
		lb, err := New(&fakeSource{list: list}, WithContextHandler(testHandler), WithFilters(NewVersionFilter()),
			WithRules(Rules{Matches: ms, CanaryPercent: float64(rng.IntN(3) * 50)}))
		require.NoError(t, err)
		for k := 0; k < 20; k++ {
			g := grayValues[rng.IntN(len(grayValues))]
			hdr := []string{"gray", g}
			for _, key := range keys {
				hdr = append(hdr, key, vals[rng.IntN(len(vals))])
			}
			ctx := withHeaders(context.Background(), hdr...)
			r, err := lb.routeReq(ctx, "svc")
			if g != "" {
				// The side was chosen: the gray rule as without rules.
				var got Instance
				if err == nil {
					got = r.Next()
					require.Equal(t, KindOf(g), r.Kind)
				}
				if e := checkPick(list, IsGray(g), got, err); e != nil {
					t.Fatalf("seed %d iter %d: %v (matches %+v)", seed, iter, e, ms)
				}
				continue
			}
			var got Instance
			if err == nil {
				got = r.Next()
			}
			if e := checkPick(list, r.Kind == Gray, got, err); e != nil {
				t.Fatalf("seed %d iter %d undecided: %v (matches %+v)", seed, iter, e, ms)
			}
		}
		lb.Close()
	}
}

func FuzzParseRulesMatches(f *testing.F) {
	f.Add([]byte(matchDoc))
	for _, s := range []string{`{"matches":[]}`, `{"matches":[{"key":"a","present":true,"gray":true}]}`,
		`{"matches":[{"key":"a","regex":"(?i)^x","version":"v"}]}`, `{"matches":[{"key":"a","regex":"(","gray":true}]}`,
		`{"matches":[{"key":"a","exact":"b","gray":true,"gray":true}]}`, `{"matches":[{"KEY":"a"}]}`, `{"matches":[null]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRules(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("error does not wrap ErrInvalidRules: %v", err)
			}
			return
		}
		c, err := compileRules(r)
		if err != nil {
			t.Fatalf("parsed rules do not compile: %v", err)
		}
		// Every accepted match object has Match's keys to the letter, none
		// null; every match has one condition and an effect.
		var top struct {
			Matches []map[string]json.RawMessage `json:"matches"`
		}
		_ = json.Unmarshal(data, &top)
		for _, m := range top.Matches {
			for k, v := range m {
				if !matchKeys[k] || string(v) == "null" {
					t.Fatalf("accepted match key %q = %s", k, v)
				}
			}
		}
		for _, m := range c.matches {
			if m.key == "" || (!m.gray && m.version == "") || (m.cond == matchRegex) != (m.re != nil) {
				t.Fatalf("accepted match %+v", m)
			}
		}
		// Round trip: what was accepted, written back, is accepted the same.
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ParseRules(out)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", out, err)
		}
		if len(r2.Matches) != len(r.Matches) {
			t.Fatalf("round trip changed the matches: %s", out)
		}
	})
}
