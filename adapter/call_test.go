package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Call.End reports each result to the instance's Stats and the
// CallObserver as its doc says.
func TestCall_End(t *testing.T) {
	for _, c := range []struct {
		r        adapter.Result
		told     bool // the CallObserver is told of the call
		callOK   bool
		latency  bool // the Stats get the call's latency
		failures int  // the Stats count a failure
	}{
		{adapter.OK, true, true, true, 0},
		{adapter.Failed, true, false, true, 1},
		{adapter.Cancelled, false, false, false, 0},
		{adapter.DeadlineAnswered, true, false, true, 0},
		{adapter.DeadlineNoAnswer, true, false, true, 1},
		{adapter.Result(99), true, false, true, 1},
	} {
		t.Run(c.r.String(), func(t *testing.T) {
			var told []bool
			lb := newLB(t, graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 100}),
				graylb.WithCallObserver(func(_ string, _ graylb.Instance, _ graylb.Kind, ok bool, _ time.Duration) { told = append(told, ok) }))
			rt, err := adapter.For(lb).Route(context.Background(), "svc", gray("false"))
			require.NoError(t, err)
			call := rt.Start()
			require.EqualValues(t, 1, call.Stats().InFlight())
			time.Sleep(time.Millisecond) // must sleep: the latency measured is the call's time
			call.End(c.r)
			assert.EqualValues(t, 0, call.Stats().InFlight(), "the call left the in-flight count")
			if c.told {
				assert.Equal(t, []bool{c.callOK}, told)
			} else {
				assert.Empty(t, told)
			}
			assert.Equal(t, c.latency, call.Stats().Latency() > 0, "latency %v", call.Stats().Latency())
			snap, ok := lb.Snapshot("svc")
			require.True(t, ok)
			for _, in := range snap.Instances {
				if in.Addr == call.Instance.Addr() {
					assert.Equal(t, c.failures, in.Stats.Failures)
				}
			}
		})
	}
	adapter.Call{}.End(adapter.Failed) // the zero Call: nothing to do
	assert.False(t, adapter.Call{}.Tracked())
}

// Call.EndAt measures the call's duration to the moment given, for the
// Stats and the CallObserver alike: never before the call's start nor
// after now.
func TestCall_EndAt(t *testing.T) {
	var took []time.Duration
	lb := newLB(t, graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 100}),
		graylb.WithCallObserver(func(_ string, _ graylb.Instance, _ graylb.Kind, _ bool, d time.Duration) { took = append(took, d) }))
	rt, err := adapter.For(lb).Route(context.Background(), "svc", gray("false"))
	require.NoError(t, err)
	for _, c := range []struct {
		name     string
		at       func(start time.Time) time.Time
		min, max time.Duration
	}{
		{"at the last byte", func(s time.Time) time.Time { return s.Add(20 * time.Millisecond) }, 15 * time.Millisecond, 30 * time.Millisecond},
		{"before the start", func(s time.Time) time.Time { return s.Add(-time.Hour) }, 0, 10 * time.Millisecond},
		{"zero", func(time.Time) time.Time { return time.Time{} }, 0, 10 * time.Millisecond},
		{"after now", func(s time.Time) time.Time { return s.Add(time.Hour) }, 60 * time.Millisecond, time.Minute},
	} {
		took = nil
		start := time.Now()
		call := rt.Start()
		time.Sleep(60 * time.Millisecond) // must sleep: EndAt's duration is measured against the clock (the caller holds on after the instance's part ended)
		call.EndAt(adapter.OK, c.at(start))
		require.Len(t, took, 1, c.name)
		assert.GreaterOrEqual(t, took[0], c.min, c.name)
		assert.Less(t, took[0], c.max, c.name)
		assert.EqualValues(t, 0, call.Stats().InFlight(), c.name)
	}
	rt.Start().EndAt(adapter.Cancelled, time.Now())
	adapter.Call{}.EndAt(adapter.Failed, time.Now()) // the zero Call: nothing to do
}

// ResultOf reads what an error says without the transport.
func TestResultOf(t *testing.T) {
	for _, c := range []struct {
		err error
		r   adapter.Result
		ok  bool
	}{
		{nil, adapter.OK, true},
		{context.Canceled, adapter.Cancelled, true},
		{fmt.Errorf("dial: %w", context.Canceled), adapter.Cancelled, true},
		{context.DeadlineExceeded, adapter.DeadlineNoAnswer, true},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), adapter.DeadlineNoAnswer, true},
		{errors.New("connection refused"), adapter.Failed, false},
	} {
		r, ok := adapter.ResultOf(c.err)
		assert.Equal(t, c.ok, ok, "%v", c.err)
		if ok {
			assert.Equal(t, c.r, r, "%v", c.err)
		}
	}
	assert.Equal(t, adapter.OK, adapter.Answer(false))
	assert.Equal(t, adapter.Failed, adapter.Answer(true))
	assert.Equal(t, "deadline-answered", adapter.DeadlineAnswered.String())
	assert.Equal(t, "Result(99)", adapter.Result(99).String())
}
