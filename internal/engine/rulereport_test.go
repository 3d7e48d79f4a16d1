package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A source that reports no refusals is fine: nothing subscribes.
func TestWatchRefusalsWithoutReporter(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)}, WithRuleSource(staticSource{}))
	require.Zero(t, lb.RulesState().Refused)
}

type staticSource struct{}

func (staticSource) Load(context.Context) (Rules, error)        { return Rules{}, nil }
func (staticSource) Watch(func(Rules)) (stop func(), err error) { return func() {}, nil }
