package nacos

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log sink that goroutines may write concurrently.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestIntegration_ClientOlderThanItsTimeouts queries through a Supplier
// whose Client is older than its connect wait and its timeout, against a
// healthy server: every query succeeds, and nothing says the server is
// unreachable. (A select between "built" and "the connect deadline has
// passed", both ready once the Client is that old, failed about half the
// queries with ErrUnavailable.)
func TestIntegration_ClientOlderThanItsTimeouts(t *testing.T) {
	svc := uniqueService(t)
	instance(t, svc, 7401, nil)
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sup, err := NewSupplier(testOpts(t, WithTimeout(300*time.Millisecond), WithLogger(logger))...)
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close() })
	require.Eventually(t, func() bool {
		list, err := sup.Instances(context.Background(), svc)
		return err == nil && len(list) == 1
	}, 10*time.Second, 50*time.Millisecond)
	time.Sleep(time.Second) // older than the connect wait (300 ms) and the timeout

	failed := 0
	var firstErr error
	for i := 0; i < 1000; i++ {
		list, err := sup.Instances(context.Background(), svc)
		if err != nil || len(list) != 1 {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	assert.Zero(t, failed, "queries failed against a healthy server (first: %v)", firstErr)
	assert.NotContains(t, logs.String(), "unreachable", "a healthy server reported unreachable")

	// The LoadBalancer's first use of a service, long after start-up.
	late := uniqueService(t) + "-late"
	instance(t, late, 7402, nil)
	lb, err := graylb.New(sup)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	in, err := lb.Pick(context.Background(), late)
	require.NoError(t, err, "a service first used after every timeout")
	assert.Equal(t, 7402, in.Port)
	assert.False(t, strings.Contains(logs.String(), "server unavailable"), "logs: %s", logs.String())
}
