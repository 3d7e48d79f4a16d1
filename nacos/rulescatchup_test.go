package nacos

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeConfigReader stands in for a Client's side of the catch-up: its
// connection's state and the document its HTTP API answers; gate, when
// set, holds each read (which answers what was there when it began).
type fakeConfigReader struct {
	down   atomic.Bool
	mu     sync.Mutex
	data   string
	found  bool
	err    error
	gate   chan struct{}
	reads  atomic.Int64
	checks atomic.Int64 // calls of Healthy: the catch-up asks once a period
}

func (f *fakeConfigReader) Healthy() bool { f.checks.Add(1); return !f.down.Load() }

// waitPeriods waits until n whole periods of the catch-up ran: it asks
// Healthy at the start of each.
func (f *fakeConfigReader) waitPeriods(t *testing.T, n int) {
	t.Helper()
	want := f.checks.Load() + int64(n) + 1
	require.Eventually(t, func() bool { return f.checks.Load() >= want }, 5*time.Second, time.Millisecond, "%d periods of the catch-up", n)
}

func (f *fakeConfigReader) configOverHTTP(ctx context.Context, _, _ string) (string, bool, error) {
	f.mu.Lock()
	gate, data, found, err := f.gate, f.data, f.found, f.err
	f.mu.Unlock()
	f.reads.Add(1)
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
	return data, found, err
}

func (f *fakeConfigReader) set(data string, found bool, err error) {
	f.mu.Lock()
	f.data, f.found, f.err = data, found, err
	f.mu.Unlock()
}

// catchUpSource is a RuleSource on fc whose catch-up reads cr every
// period while cr is down and for after once it is back; what its one
// watch got goes to the returned channel.
func catchUpSource(t *testing.T, fc *fakeConfig, cr *fakeConfigReader, after time.Duration) (*RuleSource, <-chan graylb.Rules) {
	t.Helper()
	r := &RuleSource{client: fc, dataID: DefaultRulesDataID, group: "DEFAULT_GROUP",
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stop: make(chan struct{})}
	r.life, r.endLife = context.WithCancel(context.Background())
	r.done.Add(1)
	go r.catchUpLoop(cr, nil, 5*time.Millisecond, after)
	t.Cleanup(func() { r.Close() })
	got := make(chan graylb.Rules, 100)
	_, err := r.Watch(func(rl graylb.Rules) { got <- rl })
	require.NoError(t, err)
	return r, got
}

func grayUsers(rl graylb.Rules) []string { return rl.GrayUsers }

// While the connection is down, and for a while after, a changed document
// read over HTTP is handed over once; while connected nothing is read;
// the same document arriving later through the SDK is not handed again.
func TestRuleSource_CatchesUpOverHTTP(t *testing.T) {
	fc := &fakeConfig{}
	cr := &fakeConfigReader{}
	cr.set(`{"grayUsers":["u1"]}`, true, nil)
	_, got := catchUpSource(t, fc, cr, time.Hour)
	cr.waitPeriods(t, 10) // ten periods while connected: nothing may be read
	assert.Zero(t, cr.reads.Load(), "reads over HTTP while connected")

	cr.down.Store(true)
	select {
	case rl := <-got:
		assert.Equal(t, []string{"u1"}, grayUsers(rl))
	case <-time.After(5 * time.Second):
		t.Fatal("the document read over HTTP was not handed over")
	}
	cr.down.Store(false) // back: reads go on within the window
	before := cr.reads.Load()
	require.Eventually(t, func() bool { return cr.reads.Load() > before+3 }, 5*time.Second, 5*time.Millisecond, "reads stopped within the window")
	fc.push(`{"grayUsers":["u1"]}`) // the SDK reconnects and reports the same document
	cr.set(`{"grayUsers":["u2"]}`, true, nil)
	select {
	case rl := <-got:
		assert.Equal(t, []string{"u2"}, grayUsers(rl), "the SDK's copy of a document handed over already was handed again")
	case <-time.After(5 * time.Second):
		t.Fatal("a change within the window was not handed over")
	}
	assert.Empty(t, got)
}

// A read that began before the SDK's listener handed a document over is
// older: it is never handed over after it.
func TestRuleSource_HTTPReadNeverOverridesANewerPush(t *testing.T) {
	fc := &fakeConfig{}
	cr := &fakeConfigReader{gate: make(chan struct{})}
	cr.set(`{"grayUsers":["old"]}`, true, nil)
	cr.down.Store(true)
	_, got := catchUpSource(t, fc, cr, time.Hour)
	require.Eventually(t, func() bool { return cr.reads.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "no read began")
	fc.push(`{"grayUsers":["new"]}`)
	cr.gate <- struct{}{} // the held read answers the older document
	cr.mu.Lock()
	cr.gate, cr.data = nil, `{"grayUsers":["new"]}`
	cr.mu.Unlock()
	before := cr.reads.Load()
	require.Eventually(t, func() bool { return cr.reads.Load() > before+2 }, 5*time.Second, 5*time.Millisecond, "the loop stopped")
	require.Len(t, got, 1)
	assert.Equal(t, []string{"new"}, grayUsers(<-got))
}

// What the SDK's listener refuses or ignores is not handed over from
// HTTP either: an invalid document, a removed one, a failed read; and
// once the window after the connection's return is over, nothing is read.
func TestRuleSource_CatchUpHandsOverOnlyValidDocuments(t *testing.T) {
	fc := &fakeConfig{}
	cr := &fakeConfigReader{}
	cr.down.Store(true)
	_, got := catchUpSource(t, fc, cr, 50*time.Millisecond)
	for _, tc := range []struct {
		name  string
		data  string
		found bool
		err   error
	}{
		{"invalid", `{"grayUsers":`, true, nil},
		{"a null document", `null`, true, nil},
		{"removed", "", false, nil},
		{"empty", "", true, nil},
		{"unreachable", "", false, ErrUnavailable},
	} {
		cr.set(tc.data, tc.found, tc.err)
		before := cr.reads.Load()
		require.Eventually(t, func() bool { return cr.reads.Load() > before+2 }, 5*time.Second, 5*time.Millisecond, tc.name)
		assert.Empty(t, got, tc.name)
	}
	cr.down.Store(false)
	cr.waitPeriods(t, 12) // past the window: the ticks of 12 periods, 5 ms apart, outlast its 50 ms
	before := cr.reads.Load()
	cr.waitPeriods(t, 10)
	assert.Equal(t, before, cr.reads.Load(), "reads after the window")
}

// Close ends a read in flight at once, and is idempotent.
func TestRuleSource_CloseEndsAnHTTPRead(t *testing.T) {
	cr := &fakeConfigReader{gate: make(chan struct{})}
	cr.down.Store(true)
	r, _ := catchUpSource(t, &fakeConfig{}, cr, time.Hour)
	require.Eventually(t, func() bool { return cr.reads.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "no read began")
	start := time.Now()
	require.NoError(t, r.Close())
	assert.Less(t, time.Since(start), recoverTimeout/2)
	require.NoError(t, r.Close())
}

// A read over HTTP that a watch's stop overtook hands nothing to it: its
// function is not called once stop returned.
func TestRuleSource_CatchUpHandsNothingAfterStop(t *testing.T) {
	fc := &fakeConfig{}
	cr := &fakeConfigReader{gate: make(chan struct{})}
	cr.set(`{"grayUsers":["u1"]}`, true, nil)
	r := &RuleSource{client: fc, dataID: DefaultRulesDataID, group: "DEFAULT_GROUP",
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stop: make(chan struct{})}
	r.life, r.endLife = context.WithCancel(context.Background())
	t.Cleanup(func() { r.Close() })
	var calls atomic.Int64
	stop, err := r.Watch(func(graylb.Rules) { calls.Add(1) })
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { r.catchUpOnce(cr); close(done) }()
	require.Eventually(t, func() bool { return cr.reads.Load() > 0 }, 5*time.Second, time.Millisecond, "no read began")
	stop()
	close(cr.gate) // the read answers after stop returned
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not end")
	}
	assert.Zero(t, calls.Load(), "the watch's function was called after its stop returned")
}
