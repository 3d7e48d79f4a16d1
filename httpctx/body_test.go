package httpctx

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// calls is a CallObserver that keeps what it is told.
type calls struct {
	mu   sync.Mutex
	seen []told
}

type told struct {
	addr string
	ok   bool
	took time.Duration
}

func (c *calls) observe(_ string, in graylb.Instance, _ graylb.Kind, ok bool, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, told{in.Addr(), ok, took})
}

func (c *calls) list() []told {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]told(nil), c.seen...)
}

// waitFor waits until n calls were told.
func (c *calls) waitFor(t *testing.T, n int) []told {
	t.Helper()
	waitUntil(t, func() bool { return len(c.list()) >= n }, "%d calls told, not %d", len(c.list()), n)
	return c.list()
}

// waitUntil polls cond until it holds, for at most 5 s.
func waitUntil(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, append([]any{msg}, args...)...)
}

// statsOf returns the Stats lb keeps for in, read through a call it
// starts and ends without a result.
func statsOf(t *testing.T, lb *graylb.LoadBalancer, in graylb.Instance) *policy.Stats {
	t.Helper()
	ctx := graylb.WithValue(context.Background(), lb.Keys().Gray, in.Metadata["gray"])
	r, err := adapter.For(lb).Route(ctx, in.Service, nil)
	require.NoError(t, err)
	for i, c := range r.Instances() {
		if c.SameAddr(in) {
			call := r.Call(i)
			call.End(adapter.Cancelled)
			require.NotNil(t, call.Stats(), "no Stats kept for %s", in.Addr())
			return call.Stats()
		}
	}
	t.Fatalf("%s is not a candidate of %s", in.Addr(), in.Service)
	return nil
}

// dripping answers 200 at once with first, then one byte every 50 ms
// until the request's context ends or the test does.
func dripping(t *testing.T, first string) *httptest.Server {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			case <-tick.C:
				io.WriteString(w, ".")
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return srv
}

// readWhole sends a GET to url with the gray header, bounded by d (none when
// 0), and reads the whole body: the body, or the error of the request or
// of its body.
func readWhole(client *http.Client, url string, gray bool, d time.Duration) (string, error) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if gray {
		req.Header.Set("gray", "true")
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestTransport_StalledBodyCountsAgainstInstance: a gray instance that
// answers 200 at once and then drips its body a byte at a time, alone or
// beside a working gray instance, with default outlier detection and a
// 200 ms client deadline that the whole body is read under. Its calls
// fail for their callers at the deadline and count against it: it is
// ejected (round robin; P2C too when it is the only gray instance, and
// P2C beside a working one stops picking it once it failed), after which
// the next 20 gray requests all succeed, on the working gray instance or,
// when there is none, on prod. (Before, each ended as a fast success when
// its headers came: it was never ejected, and half the gray requests
// failed for good.)
func TestTransport_StalledBodyCountsAgainstInstance(t *testing.T) {
	for _, beside := range []bool{false, true} {
		for _, pol := range []string{"round-robin", "p2c"} {
			name := "alone/" + pol
			if beside {
				name = "beside-working-gray/" + pol
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				reg := graylb.NewRegistry()
				p := answering("prod")
				defer p.Close()
				register(t, reg, "svc", p, nil)
				want := "prod"
				if beside {
					g := answering("gray")
					defer g.Close()
					register(t, reg, "svc", g, map[string]string{"gray": "true"})
					want = "gray"
				}
				stalled := register(t, reg, "svc", dripping(t, "stall"), map[string]string{"gray": "true"})
				var ejected atomic.Bool
				opts := []graylb.Option{graylb.WithOutlierDetection(graylb.OutlierConfig{
					OnEjection: func(e graylb.Ejection) {
						if e.For > 0 && e.Addr == stalled.Addr() {
							ejected.Store(true)
						}
					},
				})}
				if pol == "p2c" {
					opts = append(opts, graylb.WithPolicy(policy.P2C()))
				}
				lb, err := graylb.New(reg, opts...)
				require.NoError(t, err)
				defer lb.Close()
				client := &http.Client{Transport: NewTransport(lb)}
				defer client.CloseIdleConnections()

				// Found out: ejected, or (P2C beside a working gray
				// instance, which it then never picks) failed once.
				failed := 0
				for i := 0; !ejected.Load() && (pol != "p2c" || !beside || failed == 0); i++ {
					require.Less(t, i, 40, "%s: 40 gray requests, %d of them failed, and the stalled instance was not found out", name, failed)
					if _, err := readWhole(client, "http://svc/", true, 200*time.Millisecond); err != nil {
						failed++
					}
				}
				for i := 0; i < 20; i++ {
					body, err := readWhole(client, "http://svc/", true, 200*time.Millisecond)
					require.NoError(t, err, "%s: gray request %d after the stalled instance was found out", name, i)
					require.Equal(t, want, body, "%s: gray request %d after the stalled instance was found out", name, i)
				}
			})
		}
	}
}

// TestTransport_BodyDurationFeedsP2C: an instance whose headers come at
// once and whose body takes 100 ms is priced by the whole: its latency
// estimate and the duration told to the CallObserver include the body,
// and P2C sends it few requests beside an instance that answers whole at
// once. (Before, it was priced by its headers and served half of them.)
func TestTransport_BodyDurationFeedsP2C(t *testing.T) {
	const delay = 100 * time.Millisecond
	reg := graylb.NewRegistry()
	slow := register(t, reg, "svc", slowBody(delay), nil)
	fast := answering("fast")
	defer fast.Close()
	register(t, reg, "svc", fast, nil)
	var obs calls
	lb, err := graylb.New(reg, graylb.WithPolicy(policy.P2C()), graylb.WithCallObserver(obs.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	defer client.CloseIdleConnections()

	bySlow := 0
	for i := 0; i < 30; i++ {
		body, err := readWhole(client, "http://svc/", false, 0)
		require.NoError(t, err)
		if body != "fast" {
			bySlow++
		}
	}
	seen := obs.waitFor(t, 30)
	for _, c := range seen {
		if c.addr == slow.Addr() {
			assert.GreaterOrEqual(t, c.took, delay, "a call to the slow body was told with its headers' duration")
		}
	}
	assert.GreaterOrEqual(t, statsOf(t, lb, slow).Latency(), delay/2, "the slow body's latency estimate")
	assert.LessOrEqual(t, bySlow, 4, "P2C sent %d of 30 requests to the instance whose body takes %v", bySlow, delay)
}

// firstThenStall answers 200 at once, its first line after d, then nothing
// until the request's context ends or the test does.
func firstThenStall(t *testing.T, d time.Duration) *httptest.Server {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return srv
}

// TestTransport_EarlyCloseIsNotAFailure: a caller that reads what it needs
// of a body (its first line, 50 ms after the headers) and closes it
// before its end, its context alive, is done with the call: it is told ok,
// with its duration to the last byte read (not to the close, 200 ms later,
// which is the caller's time), leaves the in-flight count, and never
// counts against the instance. (Before, its duration was its headers'.)
func TestTransport_EarlyCloseIsNotAFailure(t *testing.T) {
	const first, caller = 50 * time.Millisecond, 200 * time.Millisecond
	reg := graylb.NewRegistry()
	in := register(t, reg, "svc", firstThenStall(t, first), nil)
	var obs calls
	lb, err := graylb.New(reg, graylb.WithCallObserver(obs.observe), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 2}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	defer client.CloseIdleConnections()
	stats := statsOf(t, lb, in)

	for i := 0; i < 4; i++ {
		resp, err := client.Get("http://svc/")
		require.NoError(t, err)
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "first\n", line)
		time.Sleep(caller) // must sleep: the caller's own time, which the call's duration must not include
		require.NoError(t, resp.Body.Close())
		require.Zero(t, stats.InFlight(), "a body closed early left its call in flight")
	}
	seen := obs.waitFor(t, 4)
	for _, c := range seen {
		assert.True(t, c.ok, "a body closed early was told failed")
		assert.GreaterOrEqual(t, c.took, first, "a body closed early was told with its headers' duration")
		assert.Less(t, c.took, first+caller, "a body closed early was told with the caller's time after its last byte")
	}
	assert.False(t, stats.Ejected(), "bodies closed early ejected their instance")
}

// resetting answers 200 with a Content-Length of 100, sends 10 bytes, then
// resets the connection.
func resetting(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTransport_ResetMidBodyFails: a body whose connection is reset before
// its end fails its call: told failed, counted against the instance, which
// outlier detection ejects. (Before, each was a success.)
func TestTransport_ResetMidBodyFails(t *testing.T) {
	reg := graylb.NewRegistry()
	in := register(t, reg, "svc", resetting(t), nil)
	var obs calls
	lb, err := graylb.New(reg, graylb.WithCallObserver(obs.observe), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 3}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	defer client.CloseIdleConnections()
	stats := statsOf(t, lb, in)

	for i := 0; i < 3; i++ {
		_, err := readWhole(client, "http://svc/", false, 0)
		require.Error(t, err, "a body reset mid-stream was read whole")
	}
	for _, c := range obs.waitFor(t, 3) {
		assert.False(t, c.ok, "a body reset mid-stream was told ok")
	}
	assert.True(t, stats.Ejected(), "3 bodies reset mid-stream did not eject their instance")
	assert.Zero(t, stats.InFlight())
}

// TestTransport_NoBodyEndsAtOnce: a response without a body (HEAD, 204,
// 304) ends its call when it comes, whether or not the caller closes it,
// and its body is http.NoBody, with a try timeout too.
func TestTransport_NoBodyEndsAtOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/204" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		io.WriteString(w, "body")
	}))
	defer srv.Close()
	reg := graylb.NewRegistry()
	in := register(t, reg, "svc", srv, nil)
	var obs calls
	lb, err := graylb.New(reg, graylb.WithCallObserver(obs.observe), graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.NoError(t, err)
	defer lb.Close()
	stats := statsOf(t, lb, in)
	for _, opts := range [][]TransportOption{nil, {WithTryTimeout(time.Second)}} {
		tr := NewTransport(lb, opts...)
		for _, c := range []struct{ method, path string }{{http.MethodHead, "/"}, {http.MethodGet, "/204"}} {
			req, _ := http.NewRequest(c.method, "http://svc"+c.path, nil)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, http.NoBody, resp.Body, "%s %s (options %d)", c.method, c.path, len(opts))
			assert.Zero(t, stats.InFlight(), "%s %s (options %d): a response without a body is still in flight", c.method, c.path, len(opts))
		}
		tr.CloseIdleConnections()
	}
	for _, c := range obs.waitFor(t, 4) {
		assert.True(t, c.ok)
	}
}

// TestTransport_ProtocolSwitchEndsAtItsHeaders: a 101 ends the HTTP
// exchange: its call ends when it comes (the connection that follows is
// another protocol's, however long it lives), and its body stays the
// writable connection, with and without a try timeout.
func TestTransport_ProtocolSwitchEndsAtItsHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		buf.Flush()
		io.Copy(conn, conn)
	}))
	defer srv.Close()
	reg := graylb.NewRegistry()
	in := register(t, reg, "svc", srv, nil)
	lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.NoError(t, err)
	defer lb.Close()
	stats := statsOf(t, lb, in)
	for _, opts := range [][]TransportOption{nil, {WithTryTimeout(time.Second)}} {
		req, _ := http.NewRequest(http.MethodGet, "http://svc/", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := (&http.Client{Transport: NewTransport(lb, opts...)}).Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		assert.Zero(t, stats.InFlight(), "a protocol switch is in flight after its headers")
		rw, ok := resp.Body.(io.ReadWriteCloser)
		require.True(t, ok, "the upgraded body is not writable")
		_, err = rw.Write([]byte("ping"))
		require.NoError(t, err)
		got := make([]byte, 4)
		_, err = io.ReadFull(rw, got)
		require.NoError(t, err)
		require.Equal(t, "ping", string(got))
		require.NoError(t, rw.Close())
	}
}

// TestTransport_DeadlineMidBodyIsNoAnswer: a body its caller's deadline
// cuts is a call its instance did not answer in time (it counts against
// it, with the time waited), and one its caller cancels says nothing of
// the instance.
func TestTransport_DeadlineMidBodyIsNoAnswer(t *testing.T) {
	reg := graylb.NewRegistry()
	in := register(t, reg, "svc", dripping(t, "x"), nil)
	var obs calls
	lb, err := graylb.New(reg, graylb.WithCallObserver(obs.observe), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1000}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	defer client.CloseIdleConnections()
	stats := statsOf(t, lb, in)

	_, err = readWhole(client, "http://svc/", false, 150*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	seen := obs.waitFor(t, 1)
	assert.False(t, seen[0].ok, "a body cut by its caller's deadline was told ok")
	assert.GreaterOrEqual(t, seen[0].took, 150*time.Millisecond)
	assert.GreaterOrEqual(t, stats.Latency(), 900*time.Millisecond, "a body cut by its caller's deadline is priced as a failure")

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.ErrorIs(t, err, context.Canceled)
	waitUntil(t, func() bool { return stats.InFlight() == 0 }, "a cancelled body is still in flight")
	assert.Len(t, obs.list(), 1, "a body its caller cancelled was told")
}

// TestTransport_BodyTimeoutCutsADrip: with WithBodyTimeout, a body that
// trickles a byte at a time (no read ever waits long: an idle timeout
// would not fire) is cut once it has been open that long, whether the
// caller is reading it or not: the read returns an error wrapping
// ErrBodyTimeout, the call counts against the instance and leaves the
// in-flight count. A try timeout (to the headers) does not cut it.
func TestTransport_BodyTimeoutCutsADrip(t *testing.T) {
	const d = 300 * time.Millisecond
	reg := graylb.NewRegistry()
	in := register(t, reg, "svc", dripping(t, "x"), nil)
	var obs calls
	lb, err := graylb.New(reg, graylb.WithCallObserver(obs.observe), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1000}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithBodyTimeout(d), WithTryTimeout(100*time.Millisecond))}
	defer client.CloseIdleConnections()
	stats := statsOf(t, lb, in)

	start := time.Now()
	_, err = readWhole(client, "http://svc/", false, 0)
	took := time.Since(start)
	require.ErrorIs(t, err, ErrBodyTimeout)
	assert.GreaterOrEqual(t, took, d)
	assert.Less(t, took, 3*d, "the drip was not cut at the body timeout")
	seen := obs.waitFor(t, 1)
	assert.False(t, seen[0].ok, "a body cut by the body timeout was told ok")
	assert.GreaterOrEqual(t, stats.Latency(), 900*time.Millisecond, "a body cut by the body timeout is priced as a failure")
	assert.Zero(t, stats.InFlight())

	// A body nobody reads is cut too: its call ends, its connection is
	// released.
	resp, err := client.Get("http://svc/")
	require.NoError(t, err)
	waitUntil(t, func() bool { return len(obs.list()) == 2 }, "a body nobody reads was not cut")
	assert.False(t, obs.list()[1].ok)
	assert.Zero(t, stats.InFlight())
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, ErrBodyTimeout)
	require.NoError(t, resp.Body.Close())
}

// TestTransport_BodyTimeoutSparesAWholeBody: a body read to its end within
// the body timeout is an answer like any other, however slowly it came.
func TestTransport_BodyTimeoutSparesAWholeBody(t *testing.T) {
	reg := graylb.NewRegistry()
	srv := slowBody(100 * time.Millisecond)
	defer srv.Close()
	register(t, reg, "svc", srv, nil)
	var obs calls
	lb, err := graylb.New(reg, graylb.WithCallObserver(obs.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithBodyTimeout(2*time.Second))}
	defer client.CloseIdleConnections()
	for i := 0; i < 3; i++ {
		body, err := readWhole(client, "http://svc/", false, 0)
		require.NoError(t, err)
		require.Equal(t, "head...tail", body)
	}
	for _, c := range obs.waitFor(t, 3) {
		assert.True(t, c.ok)
		assert.GreaterOrEqual(t, c.took, 100*time.Millisecond)
	}
}
