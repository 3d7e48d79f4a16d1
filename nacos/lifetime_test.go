package nacos

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// hangingProxy forwards TCP connections from a loopback port to target
// until hang is called; from then on it keeps every connection open and
// forwards nothing, as a server that stopped answering.
type hangingProxy struct {
	ln      net.Listener
	target  string
	hanging atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newHangingProxy(t *testing.T, target string) *hangingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &hangingProxy{ln: ln, target: target}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *hangingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hanging.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *hangingProxy) hang() { p.hanging.Store(true) }

// goroutinesIn counts the goroutines whose stack holds every one of
// frames.
func goroutinesIn(frames ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			count++
		}
	}
	return count
}

// TestIntegration_CloseWaitsForCallsCutShort: a query that its ctx cut
// short while the server hangs leaves the SDK's call running; the
// Client's Close waits for it (closing the connection ends it), so that
// no goroutine of the Client outlives Close. (Close used to return while
// the call went on.)
func TestIntegration_CloseWaitsForCallsCutShort(t *testing.T) {
	addr := nacosAddr(t)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	httpPort, err := strconv.Atoi(port)
	require.NoError(t, err)
	proxy := newHangingProxy(t, net.JoinHostPort(host, strconv.Itoa(httpPort+1000))) // the gRPC port
	grpcPort := proxy.ln.Addr().(*net.TCPAddr).Port
	require.Greater(t, grpcPort, 1000)
	dir := sdkDir(t)
	cl, err := NewClient(context.Background(), WithServers(net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort-1000))),
		WithCacheDir(dir), WithLogDir(dir), WithLogLevel("error"), WithTimeout(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.Eventually(t, cl.Healthy, 10*time.Second, 20*time.Millisecond, "connected through the proxy")
	_, err = cl.query(context.Background(), "svc", "DEFAULT_GROUP", nil)
	require.NoError(t, err, "the proxy forwards")

	frames := []string{"QueryInstancesOfService", "graylb/nacos"}
	before := goroutinesIn(frames...)
	proxy.hang()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = cl.query(ctx, "svc", "DEFAULT_GROUP", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the server hangs")
	require.Equal(t, before+1, goroutinesIn(frames...), "the SDK's call goes on after its caller left")
	start := time.Now()
	require.NoError(t, cl.Close())
	t.Logf("Close took %v with a call in flight", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, before, goroutinesIn(frames...), "the SDK's call outlived Close")
}
