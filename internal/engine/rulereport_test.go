package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFileRuleSourceRefusalsReachRulesState(t *testing.T) {
	path := t.TempDir() + "/rules.json"
	require.NoError(t, writeFile(path, `{"grayUsers":["alice"]}`))
	src, err := NewFileRuleSource(path, WithPollInterval(5*time.Millisecond), WithFileLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	reported := make(chan error, 8)
	stopTest := src.OnRefused(func(err error) { reported <- err })
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)}, WithRuleSource(src))
	require.Equal(t, uint64(1), lb.RulesState().Changes)
	require.Zero(t, lb.RulesState().Refused)

	// A bad document written after start: refused by Watch, recorded.
	require.NoError(t, writeFile(path, `{"grayUsers":["alice"],"canaryPercent":"<b>x</b>"}`))
	require.Eventually(t, func() bool { return lb.RulesState().Refused == 1 }, 5*time.Second, time.Millisecond)
	st := lb.RulesState()
	require.Contains(t, st.LastRefusedError, path)
	require.NotNil(t, st.LastRefused)
	require.Nil(t, st.LastRefusedRules, "a document that does not parse has no rules")
	require.Equal(t, []string{"alice"}, st.Rules.GrayUsers, "the previous rules stay in force")
	stopTest()
	require.ErrorIs(t, <-reported, ErrInvalidRules)

	// A valid document again, then a second bad one: counted once more.
	require.NoError(t, writeFile(path, `{"grayUsers":["bob"]}`))
	require.Eventually(t, func() bool { return lb.RulesState().Changes == 2 }, 5*time.Second, time.Millisecond)
	require.NoError(t, writeFile(path, `{"grayUsers":[""]}`))
	require.Eventually(t, func() bool { return lb.RulesState().Refused == 2 }, 5*time.Second, time.Millisecond)
	require.Contains(t, lb.RulesState().LastRefusedError, "grayUsers[0] is empty")

	// Close ends the subscription.
	require.Equal(t, 1, src.refusals.Len())
	require.NoError(t, lb.Close())
	require.Zero(t, src.refusals.Len())
}

// A source that reports no refusals is fine: nothing subscribes.
func TestWatchRefusalsWithoutReporter(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)}, WithRuleSource(staticSource{}))
	require.Zero(t, lb.RulesState().Refused)
}

type staticSource struct{}

func (staticSource) Load(context.Context) (Rules, error)        { return Rules{}, nil }
func (staticSource) Watch(func(Rules)) (stop func(), err error) { return func() {}, nil }
