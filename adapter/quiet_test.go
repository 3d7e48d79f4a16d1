package adapter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// admitFor admits a call every 2 ms until stop is closed, queued records
// when queued.
func admitFor(a *adapter.Admitter, queued bool, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			a.Admit(context.Background(), mapCarrier{"gray": "true"}, adapter.Admission{Queued: queued})
		}
	}
}

// Quiet waits while calls keep arriving and returns a quiet period after
// the last one; records from a queue do not keep it waiting.
func TestQuiet_WaitsForCallersToStop(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	require.NoError(t, err)
	defer lb.Close()
	a := adapter.For(lb).Admitter()

	stop, records := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go admitFor(a, false, stop, &wg)
	go admitFor(a, true, records, &wg)
	defer func() { close(records); wg.Wait() }()

	const quiet = 100 * time.Millisecond
	done := make(chan time.Time, 1)
	begin := time.Now()
	go func() {
		last, err := adapter.For(lb).Quiet(context.Background(), quiet)
		assert.NoError(t, err)
		assert.False(t, last.IsZero(), "it saw calls arrive")
		done <- time.Now()
	}()
	// Callers keep coming for 400 ms: Quiet waits for them.
	select {
	case <-done:
		t.Fatalf("Quiet returned after %v while calls kept arriving", time.Since(begin))
	case <-time.After(400 * time.Millisecond):
	}
	close(stop)
	stopped := time.Now()
	select {
	case at := <-done:
		assert.GreaterOrEqual(t, at.Sub(stopped), quiet-20*time.Millisecond, "a quiet period after the last call")
	case <-time.After(5 * time.Second):
		t.Fatal("Quiet did not return once the calls stopped (records from a queue kept it waiting?)")
	}

	// ctx bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stop2 := make(chan struct{})
	wg.Add(1)
	go admitFor(a, false, stop2, &wg)
	_, err = adapter.For(lb).Quiet(ctx, time.Hour)
	close(stop2)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// The arrival clock adds no allocation to an admission, watched or not.
func TestQuiet_AdmissionAllocatesNothingMore(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	lb, err := graylb.New(graylb.NewRegistry())
	require.NoError(t, err)
	defer lb.Close()
	a := adapter.For(lb).Admitter()
	c := mapCarrier{}
	ctx := context.Background()
	base := testing.AllocsPerRun(200, func() { a.Admit(ctx, c, adapter.Admission{}) })
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go adapter.For(lb).Quiet(qctx, time.Hour)
	watched := testing.AllocsPerRun(200, func() { a.Admit(ctx, c, adapter.Admission{}) })
	assert.Zero(t, base)
	assert.Zero(t, watched)
}
