package nacos

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
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

// TestIntegration_CloseDuringDeregister: closing the Client while a
// deregistration waits for its lost connection ends the wait with an error
// that says the Client closed (wrapping graylb.ErrClosed), not a malformed
// "%!w(<nil>)" (the caller's ctx had not ended). Needs no server: the
// Client's server does not answer; skipped under -race with the other SDK
// tests.
func TestIntegration_CloseDuringDeregister(t *testing.T) {
	if raceEnabled {
		t.Skip("uses the SDK, which races inside its RPC client; make test runs it without -race")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	dir := sdkDir(t)
	cl, err := NewClient(context.Background(), WithServers(dead), WithCacheDir(dir), WithLogDir(dir), WithTimeout(time.Second), WithoutDiskCacheAtStart())
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.Eventually(t, func() bool { return cl.builtNaming() != nil }, 30*time.Second, 20*time.Millisecond, "the SDK's constructor gave up connecting")

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan struct{})
	var derr error
	go func() {
		defer close(done)
		derr = cl.deregister(ctx, time.Second, "svc", "DEFAULT_GROUP", model.Instance{Ip: "127.0.0.1", Port: 8080, Ephemeral: true})
	}()
	time.Sleep(100 * time.Millisecond) // waiting for the connection (nothing to observe)
	require.False(t, returned(done), "deregister waits for the connection")
	require.NoError(t, cl.Close())
	within(t, done, 10*time.Second, "deregister returns when the Client closes")
	require.Error(t, derr)
	assert.ErrorIs(t, derr, graylb.ErrClosed)
	assert.NotContains(t, derr.Error(), "%!")
	assert.Contains(t, derr.Error(), "closed")
}
