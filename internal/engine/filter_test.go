package engine

import (
	"context"
	"math"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// A filter that fails under new rules cannot keep the old routing: prod
// must stop reaching an instance the new rules make gray. The gray
// decision alone routes until the filter builds again.
func TestChain_FailingFilterUnderNewRulesKeepsProdOffGray(t *testing.T) {
	var boom atomic.Bool
	f := filterOfBuild(func(in BuildInfo) Stage {
		if boom.Load() {
			panic("boom")
		}
		return passStage{in.Instances}
	})
	lb, _ := newTestLB(t, []Instance{inst("svc", 1), inst("svc", 2)}, WithFilters(f))
	prod := withHeaders(context.Background(), "gray", "false")
	got, err := pickedSet(t, lb, prod, "svc", 6)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2"}, got)
	boom.Store(true)
	require.NoError(t, lb.SetRules(Rules{GrayAddresses: []string{"127.0.0.1:2"}}))
	got, err = pickedSet(t, lb, prod, "svc", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1"}, got, "prod reached the instance the new rules made gray")
}
