package graylb

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionFilter(t *testing.T) {
	list := []Instance{
		inst("svc", 1, "version", "v1"), inst("svc", 2, "version", "v2"), inst("svc", 3),
		inst("svc", 4, "version", "v1", "gray", "true"),
	}
	bg := context.Background()
	for _, tc := range []struct {
		name string
		list []Instance
		self string
		ctx  context.Context
		want []string
	}{
		{"exact version", list, "", withHeaders(bg, "version", "v1"), []string{"127.0.0.1:1"}},
		{"unknown version goes to unversioned", list, "", withHeaders(bg, "version", "v9"), []string{"127.0.0.1:3"}},
		{"no version goes to unversioned", list, "", bg, []string{"127.0.0.1:3"}},
		{"own version", list, "v2", bg, []string{"127.0.0.1:2"}},
		{"header beats own version", list, "v2", withHeaders(bg, "version", "v1"), []string{"127.0.0.1:1"}},
		{"context value", list, "", WithValue(bg, "version", "v2"), []string{"127.0.0.1:2"}},
		{"none unversioned: any", list[:2], "", withHeaders(bg, "version", "v9"), []string{"127.0.0.1:1", "127.0.0.1:2"}},
		{"runs after gray", list, "", withHeaders(bg, "version", "v1", "gray", "true"), []string{"127.0.0.1:4"}},
		{"gray with other version: any gray", list, "", withHeaders(bg, "version", "v2", "gray", "true"), []string{"127.0.0.1:4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, _ := newTestLB(t, tc.list, WithFilters(NewVersionFilter(WithSelfVersion(tc.self))))
			got, err := pickedSet(t, lb, tc.ctx, "svc", 10)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// passStage yields its candidates unchanged.
type passStage struct{ all []Instance }

func (s passStage) Subsets() [][]Instance { return [][]Instance{s.all} }
func (s passStage) Choose(Request) int    { return 0 }

type orderRecorder struct {
	order int
	log   *[]int
}

func (o orderRecorder) Order() int { return o.order }
func (o orderRecorder) Build(in BuildInfo) Stage {
	*o.log = append(*o.log, o.order)
	return passStage{in.Instances}
}

func TestChain_OrderAndCustomFilters(t *testing.T) {
	var log []int
	list := []Instance{inst("svc", 1), inst("svc", 2)}
	lb, _ := newTestLB(t, list, WithFilters(orderRecorder{5, &log}, orderRecorder{-3, &log}, orderRecorder{math.MinInt, &log}))
	_, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.NotEmpty(t, log)
	assert.Equal(t, []int{math.MinInt, -3, 5}, log[:3], "lower order first")
	assert.Len(t, lb.filters, 3, "the gray decision is the root, not one of the filters")
}

func TestChain_StageOutOfRangeIsNoInstance(t *testing.T) {
	bad := stageFunc(func(Request) int { return 7 })
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)}, WithFilters(filterOf(bad)))
	_, err := lb.Pick(context.Background(), "svc")
	require.ErrorIs(t, err, ErrNoInstance)
}

func TestChain_PanickingBuildKeepsPrevious(t *testing.T) {
	boom := false
	f := filterOfBuild(func(in BuildInfo) Stage {
		if boom {
			panic("boom")
		}
		return passStage{in.Instances}
	})
	lb, reg := newTestLB(t, []Instance{inst("svc", 1)}, WithFilters(f))
	_, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	boom = true
	require.NoError(t, reg.Register(inst("svc", 2)))
	got, err := pickedSet(t, lb, context.Background(), "svc", 6)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1"}, got, "the routing before the panic keeps serving")
}

type stageFunc func(Request) int

func (f stageFunc) Subsets() [][]Instance { return [][]Instance{nil} }
func (f stageFunc) Choose(r Request) int  { return f(r) }

type buildFunc struct{ fn func(BuildInfo) Stage }

func (b buildFunc) Order() int               { return 0 }
func (b buildFunc) Build(in BuildInfo) Stage { return b.fn(in) }

func filterOf(s Stage) ServerFilter                       { return buildFunc{func(BuildInfo) Stage { return s }} }
func filterOfBuild(fn func(BuildInfo) Stage) ServerFilter { return buildFunc{fn} }

func TestStrictRoundRobin_Cycles(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2), inst("svc", 3)}
	p := StrictRoundRobin().NewPicker(list)
	first := p.Next()
	for i := 1; i < 30; i++ {
		assert.Equal(t, (first+i)%3, p.Next())
	}
}

func TestRoundRobin_EvenShares(t *testing.T) {
	list := make([]Instance, 7)
	p := RoundRobin().NewPicker(list)
	counts := make([]int, len(list))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]int, len(list))
			for i := 0; i < 7000; i++ {
				local[p.Next()]++
			}
			mu.Lock()
			for i, c := range local {
				counts[i] += c
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, c := range counts {
		// Each core rotates strictly; shards switch only when a goroutine
		// moves or the pool is emptied, so shares stay within a few turns.
		assert.InDelta(t, 4000, c, 400, "instance %d", i)
	}
}

func TestRandom_Covers(t *testing.T) {
	p := Random().NewPicker(make([]Instance, 5))
	seen := map[int]int{}
	for i := 0; i < 5000; i++ {
		seen[p.Next()]++
	}
	for i := 0; i < 5; i++ {
		assert.InDelta(t, 1000, seen[i], 200)
	}
}

func TestWeightedRoundRobin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []float64
	}{
		{"integers", []float64{1, 2, 3}},
		{"fractional below one", []float64{0.1, 0.3, 0.6}},
		{"zero gets nothing", []float64{0, 1, 1}},
		{"wide spread", []float64{0.001, 1000, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := make([]Instance, len(tc.weights))
			total := 0.0
			for i, w := range tc.weights {
				list[i] = inst("svc", i+1)
				list[i].Weight = w
				total += w
			}
			p := WeightedRoundRobin().NewPicker(list)
			sched := p.(*weighted).schedule
			counts := make([]int, len(list))
			// Each core walks the schedule on its own counter (and -race
			// makes sync.Pool switch counters at random), so shares are
			// exact only over many turns.
			n := max(len(sched)*3, 6000)
			for i := 0; i < n; i++ {
				counts[p.Next()]++
			}
			for i, w := range tc.weights {
				if w == 0 {
					assert.Zero(t, counts[i], "weight 0 never picked")
					continue
				}
				assert.Positive(t, counts[i], "a positive weight is picked")
				share := float64(counts[i]) / float64(n)
				assert.InDelta(t, w/total, share, math.Max(0.02, 2.0/float64(len(sched))), "share of %v", w)
			}
		})
	}
}

func TestWeightedRoundRobin_Smooth(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2)}
	list[0].Weight, list[1].Weight = 3, 1
	sched := WeightedRoundRobin().NewPicker(list).(*weighted).schedule
	require.Len(t, sched, 4)
	// The weight-1 instance is not bunched: never twice in a row, and the
	// weight-3 one never runs more than 3 in a row across the wrap.
	run := 0
	for i := 0; i < 8; i++ {
		if sched[i%4] == 0 {
			run++
			assert.LessOrEqual(t, run, 3)
		} else {
			run = 0
		}
	}
}

func TestLoadBalancer_BadInput(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)})
	_, err := lb.Pick(context.Background(), "")
	assert.ErrorIs(t, err, ErrInvalidService)
	_, err = lb.Pick(context.Background(), string(make([]byte, MaxServiceNameLen+1)))
	assert.ErrorIs(t, err, ErrInvalidService)
	_, err = lb.Pick(context.Background(), "nope")
	assert.ErrorIs(t, err, ErrUnknownService)
	//nolint:staticcheck // a nil context must not panic
	_, err = lb.Pick(nil, "svc")
	assert.NoError(t, err)
	_, err = New(nil)
	assert.Error(t, err)
	lb2, err := New(NewRegistry(), nil, WithPolicy(nil), WithGrayHeader(""), WithFilters(nil))
	require.NoError(t, err)
	require.NoError(t, lb2.Close())
	_, err = lb2.Pick(context.Background(), "svc")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = New(NewRegistry(), WithRules(Rules{CanaryPercent: math.NaN()}))
	assert.ErrorIs(t, err, ErrInvalidRules)
}

func TestLoadBalancer_FollowsRegistry(t *testing.T) {
	lb, reg := newTestLB(t, []Instance{inst("svc", 1)})
	ctx := context.Background()
	g := withHeaders(ctx, "gray", "true")
	in, err := lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 1, in.Port, "gray falls back to prod")
	require.NoError(t, reg.Register(inst("svc", 2, "gray", "true")))
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port)
	require.NoError(t, reg.SetMetadata("svc", "127.0.0.1:1", "gray", "true"))
	_, err = lb.Pick(ctx, "svc")
	require.ErrorIs(t, err, ErrNoInstance, "no prod instance left")
	require.NoError(t, reg.Update("svc", "127.0.0.1:2", func(i *Instance) { i.Healthy = false }))
	require.NoError(t, reg.SetMetadata("svc", "127.0.0.1:1", "gray", "false"))
	got, err := pickedSet(t, lb, g, "svc", 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1"}, got, "an unhealthy gray instance is no gray instance")
}

func TestFileRuleSource(t *testing.T) {
	path := t.TempDir() + "/rules.json"
	require.NoError(t, writeFile(path, `{"closed":true}`))
	src, err := NewFileRuleSource(path, WithPollInterval(10*time.Millisecond))
	require.NoError(t, err)
	lb, _ := newTestLB(t, []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2)}, WithRuleSource(src))
	g := withHeaders(context.Background(), "gray", "true")
	in, err := lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port)

	require.NoError(t, writeFile(path, `{"closed":`)) // broken: refused
	time.Sleep(50 * time.Millisecond)
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port, "a broken document leaves the old rules")

	require.NoError(t, writeFile(path, `{"closed":false}`))
	require.Eventually(t, func() bool {
		in, err := lb.Pick(g, "svc")
		return err == nil && in.Port == 1
	}, 5*time.Second, 10*time.Millisecond)

	_, err = NewFileRuleSource("")
	assert.ErrorIs(t, err, ErrInvalidRules)
	missing, _ := NewFileRuleSource(t.TempDir() + "/missing.json")
	_, err = missing.Load(context.Background())
	assert.Error(t, err)
}

var _ = errors.Is

func TestOddMetadataAndNames(t *testing.T) {
	big := strings.Repeat("x", 1<<16)
	odd := []map[string]string{
		nil, {}, {"": "true"}, {"gray": big}, {"GRAY": "true"}, {"gray\x00": "true"},
		{"gray": "tru\u00e9"}, {"gray": "\u0074rue"}, {"version": big}, {"gray": "true", "version": ""},
	}
	reg := NewRegistry()
	for i, md := range odd {
		require.NoError(t, reg.Register(NewInstance("svc", "127.0.0.1", 5000+i, md)))
	}
	lb, err := New(reg, WithContextHandler(testHandler), WithFilters(NewVersionFilter()), WithPolicy(WeightedRoundRobin()))
	require.NoError(t, err)
	defer lb.Close()
	for _, v := range []string{"", "true", big, "\x00", "\u0074rue"} {
		for _, ver := range []string{"", big, "v1"} {
			in, err := lb.Pick(withHeaders(context.Background(), "gray", v, "version", ver), "svc")
			require.NoError(t, err)
			if !IsGray(v) {
				assert.False(t, IsGray(in.Metadata["gray"]), "prod request on %v", in.Metadata)
			} else {
				assert.True(t, IsGray(in.Metadata["gray"]))
			}
		}
	}
	// Names: non-ASCII bytes are still just a name; a space or '/' could
	// break out of a URL and is refused.
	require.NoError(t, reg.Register(NewInstance("svc-and\u00e9", "::1", 80, nil)))
	_, err = lb.Pick(context.Background(), "svc-and\u00e9")
	require.NoError(t, err)
	assert.ErrorIs(t, reg.Register(NewInstance("svc with spaces/and", "::1", 80, nil)), ErrInvalidService)
	assert.Equal(t, "[::1]:80", NewInstance("s", "::1", 80, nil).Addr())
}
