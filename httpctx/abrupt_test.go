package httpctx

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killable is an HTTP server that stops the way kill -9 stops a process:
// its listener closes and every connection is reset (RST), nothing is
// drained; the registry still lists it.
type killable struct {
	l      net.Listener
	srv    *http.Server
	mu     sync.Mutex
	conns  map[net.Conn]bool
	killed bool // a connection accepted as kill ran is reset as the server sees it
}

func startKillable(t testing.TB, h http.Handler) *killable {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	k := &killable{l: l, conns: map[net.Conn]bool{}}
	k.srv = &http.Server{Handler: h, ConnState: func(c net.Conn, s http.ConnState) {
		k.mu.Lock()
		defer k.mu.Unlock()
		switch s {
		case http.StateNew:
			if k.killed { // accepted just before the listener closed
				reset(c)
				return
			}
			k.conns[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(k.conns, c)
		}
	}}
	go k.srv.Serve(l)
	t.Cleanup(func() { k.srv.Close() })
	return k
}

// register adds k to reg as an instance of service.
func (k *killable) register(t testing.TB, reg *graylb.Registry, service string, md map[string]string) graylb.Instance {
	t.Helper()
	a := k.l.Addr().(*net.TCPAddr)
	in := graylb.NewInstance(service, a.IP.String(), a.Port, md)
	require.NoError(t, reg.Register(in))
	return in
}

func (k *killable) addr() string { return k.l.Addr().String() }

// kill closes the listener and resets every connection.
func (k *killable) kill() {
	k.l.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killed = true
	for c := range k.conns {
		reset(c)
	}
}

// reset closes c with RST, as the kernel does for a killed process with
// unread data.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// call sends method to http://service/ with the gray header (none when
// gray is "") and returns the answer's body.
func call(client *http.Client, method, service, gray string, body string) (string, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+service+"/", r)
	if err != nil {
		return "", err
	}
	if gray != "" {
		req.Header.Set("gray", gray)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), err
}

// loadTally counts one side's requests.
type loadTally struct {
	sent, failed, onGray, onProd atomic.Int64
	afterKill                    atomic.Int64
	// beforeKillAstray: requests answered before the kill began, by
	// another instance than their kind's or not at all (a gray request
	// answered by prod while the gray instance was alive, say).
	beforeKillAstray atomic.Int64
	firstErr         atomic.Value
}

func (tl *loadTally) String() string {
	return fmt.Sprintf("%d sent, %d failed, %d on gray, %d on prod; %d answered astray before the kill; after the kill %d",
		tl.sent.Load(), tl.failed.Load(), tl.onGray.Load(), tl.onProd.Load(), tl.beforeKillAstray.Load(), tl.afterKill.Load())
}

// TestTransport_AbruptStopOfOnlyGray: the only gray instance of a service
// stops abruptly (listener closed, connections reset) while the registry
// still lists it, under a steady load of gray and prod GETs. A gray
// instance that refuses connections serves nobody: gray GETs fall back to
// prod without one failing, prod GETs never reach gray, and a POST gets a
// fast error that names the instance and says why it was not retried.
func TestTransport_AbruptStopOfOnlyGray(t *testing.T) {
	reg := graylb.NewRegistry()
	p1, p2 := named("prod-1"), named("prod-2")
	defer p1.Close()
	defer p2.Close()
	register(t, reg, "svc", p1, nil)
	register(t, reg, "svc", p2, map[string]string{"gray": "false"})
	gray := startKillable(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "gray")
	}))
	gray.register(t, reg, "svc", map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb), Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	var killedAt atomic.Int64 // unix nanoseconds; 0 before the kill
	var killing atomic.Bool   // set before the kill begins
	var grayT, prodT loadTally
	var firstFallback, slowest atomic.Int64 // after the kill, nanoseconds
	stop := make(chan struct{})
	var wg sync.WaitGroup
	worker := func(tl *loadTally, header string) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := killedAt.Load()
			start := time.Now()
			got, err := call(client, http.MethodGet, "svc", header, "")
			took := time.Since(start)
			if !killing.Load() && (err != nil || (got == "gray") != (header == "true")) {
				// Answered before the kill began, while every instance
				// was alive: by its own kind's instances only.
				tl.beforeKillAstray.Add(1)
			}
			tl.sent.Add(1)
			if k != 0 {
				tl.afterKill.Add(1)
				if header == "true" {
					for d := slowest.Load(); int64(took) > d && !slowest.CompareAndSwap(d, int64(took)); d = slowest.Load() {
					}
				}
			}
			switch {
			case err != nil:
				tl.failed.Add(1)
				tl.firstErr.CompareAndSwap(nil, err.Error())
			case got == "gray":
				tl.onGray.Add(1)
			default:
				tl.onProd.Add(1)
				if k != 0 && header == "true" {
					firstFallback.CompareAndSwap(0, time.Now().UnixNano()-k)
				}
			}
		}
	}
	for _, h := range []string{"true", "true", "true", "false"} {
		wg.Add(1)
		if h == "true" {
			go worker(&grayT, h)
		} else {
			go worker(&prodT, h)
		}
	}
	waitFor := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		if !assert.Eventually(t, cond, d, time.Millisecond) {
			close(stop)
			wg.Wait()
			t.Fatalf("%s: not within %v; gray: %v; prod: %v", what, d, &grayT, &prodT)
		}
	}
	waitFor("100 gray GETs served by the gray instance", 10*time.Second, func() bool { return grayT.onGray.Load() >= 100 })
	killing.Store(true)
	gray.kill()
	killedAt.Store(time.Now().UnixNano())
	waitFor("400 gray GETs after the kill", 30*time.Second, func() bool { return grayT.afterKill.Load() >= 400 })
	close(stop)
	wg.Wait()

	t.Logf("gray: %v; prod: %v; first gray GET on prod %v after the kill, slowest gray GET after it %v",
		&grayT, &prodT, time.Duration(firstFallback.Load()), time.Duration(slowest.Load()))
	assert.Zero(t, grayT.failed.Load(), "gray GETs failed; first: %v", grayT.firstErr.Load())
	assert.Zero(t, prodT.failed.Load(), "prod GETs failed; first: %v", prodT.firstErr.Load())
	assert.Zero(t, prodT.onGray.Load(), "prod GETs reached the gray instance")
	// While the gray instance was alive, gray GETs went to it and prod
	// GETs to prod, none failed: the fall-back after the kill is not one
	// that was there all along.
	assert.Zero(t, grayT.beforeKillAstray.Load(), "gray GETs answered before the kill by prod or not at all")
	assert.Zero(t, prodT.beforeKillAstray.Load(), "prod GETs answered before the kill by gray or not at all")
	assert.Positive(t, grayT.afterKill.Load()-grayT.failed.Load(), "gray GETs after the kill were served")

	// Not idempotent: a POST fails at once, with an error that names the
	// instance and says why it was not retried.
	start := time.Now()
	body, err := call(client, http.MethodPost, "svc", "true", "order")
	took := time.Since(start)
	require.Error(t, err, "the POST was answered %q", body)
	t.Logf("POST after the kill: %v in %v", err, took)
	assert.Contains(t, err.Error(), gray.addr(), "the error names the instance")
	assert.Contains(t, err.Error(), "not idempotent", "the error says why it was not retried")
	assert.Less(t, took, 5*time.Second, "a refused connection fails fast")
	require.ErrorIs(t, err, ErrConnectionFailed)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause is kept")
	var ce *ConnectionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, gray.addr(), ce.Addr)
	assert.Equal(t, []string{gray.addr()}, ce.Tried)
	assert.Equal(t, graylb.Gray, ce.Kind)
	assert.False(t, ce.Sent, "a refused connection sent nothing")
	assert.Equal(t, "POST is not idempotent", ce.Reason)

	// A body that cannot be sent again is not, even when idempotent.
	req, _ := http.NewRequest(http.MethodPut, "http://svc/", io.NopCloser(strings.NewReader("x")))
	req.Header.Set("gray", "true")
	_, err = client.Do(req)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "its body cannot be sent again (no GetBody)", ce.Reason)

	// WithRetryUnsent: nothing was sent to the refusing instance, so the
	// POST goes to prod; the instance was not acted on.
	unsent := &http.Client{Transport: NewTransport(lb, WithRetryUnsent()), Timeout: 10 * time.Second}
	defer unsent.CloseIdleConnections()
	for range 5 {
		got, err := call(unsent, http.MethodPost, "svc", "true", "order")
		require.NoError(t, err)
		assert.Contains(t, []string{"prod-1", "prod-2"}, got)
	}

	// Retries off: the refusal comes back at once, saying so.
	off := &http.Client{Transport: NewTransport(lb, WithMaxRetries(0)), Timeout: 10 * time.Second}
	defer off.CloseIdleConnections()
	_, err = call(off, http.MethodGet, "svc", "true", "")
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "retries are off", ce.Reason)

	// Idempotent by method or by key: served by prod.
	for _, m := range []struct{ method, key string }{{http.MethodHead, ""}, {http.MethodPut, ""}, {http.MethodDelete, ""}, {http.MethodPost, "k-1"}} {
		req, _ := http.NewRequest(m.method, "http://svc/", strings.NewReader("x"))
		req.Header.Set("gray", "true")
		if m.key != "" {
			req.Header.Set("Idempotency-Key", m.key)
		}
		resp, err := client.Do(req)
		require.NoError(t, err, "%s (key %q) is retried on prod", m.method, m.key)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}

	reliabilityFragment(t, "abrupt-stop-http", fmt.Sprintf(
		"| abrupt stop (listener closed, connections reset) of the only gray instance, still registered (HTTP Transport, GET under load, no outlier detection) | gray: %d GETs, %d after the kill, %d failed; prod: %d GETs, %d failed, %d on gray | first gray GET served by prod %v after the kill; slowest gray GET after it %v | a POST fails in %v: not idempotent, not retried |\n",
		grayT.sent.Load(), grayT.afterKill.Load(), grayT.failed.Load(), prodT.sent.Load(), prodT.failed.Load(), prodT.onGray.Load(),
		time.Duration(firstFallback.Load()).Round(time.Microsecond), time.Duration(slowest.Load()).Round(time.Microsecond), took.Round(time.Microsecond)))
}

// TestTransport_AbruptStopWithRequestsInFlight: requests the gray instance
// was serving when it stopped abruptly got no answer. An idempotent one is
// sent again to another instance (prod: no gray one is left); a POST may
// have been acted on, so it fails with an error that says so.
func TestTransport_AbruptStopWithRequestsInFlight(t *testing.T) {
	reg := graylb.NewRegistry()
	p := named("prod")
	defer p.Close()
	register(t, reg, "svc", p, nil)
	arrived := make(chan string, 8)
	release := make(chan struct{})
	defer close(release)
	gray := startKillable(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- r.Method
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	gray.register(t, reg, "svc", map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb), Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	methods := []string{http.MethodGet, http.MethodGet, http.MethodDelete, http.MethodPost}
	type result struct {
		method, got string
		err         error
	}
	results := make(chan result, len(methods))
	for _, m := range methods {
		go func() {
			got, err := call(client, m, "svc", "true", "payload")
			results <- result{m, got, err}
		}()
	}
	for range methods {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the requests did not reach the gray instance")
		}
	}
	gray.kill()
	for range methods {
		var r result
		select {
		case r = <-results:
		case <-time.After(15 * time.Second):
			t.Fatal("a request in flight at the kill did not return")
		}
		if r.method == http.MethodPost {
			require.Error(t, r.err, "a POST in flight is not sent again")
			t.Logf("POST in flight: %v", r.err)
			assert.Contains(t, r.err.Error(), gray.addr())
			assert.Contains(t, r.err.Error(), "not idempotent")
			assert.Contains(t, r.err.Error(), "may have been")
			var ce *ConnectionError
			require.ErrorAs(t, r.err, &ce)
			assert.True(t, ce.Sent)
			require.ErrorIs(t, r.err, ErrConnectionFailed)
			continue
		}
		require.NoError(t, r.err, "%s in flight at the kill is sent again", r.method)
		assert.Equal(t, "prod", r.got, "%s: no gray instance can serve it", r.method)
	}
}

// TestTransport_ProdNeverRetriedOntoGray: every prod instance refuses
// connections; a prod GET fails (naming what it tried) and never reaches
// the live gray instance, whatever the retries.
func TestTransport_ProdNeverRetriedOntoGray(t *testing.T) {
	reg := graylb.NewRegistry()
	g := named("gray")
	defer g.Close()
	register(t, reg, "svc", g, map[string]string{"gray": "true"})
	for range 3 {
		h, p := deadAddr(t)
		require.NoError(t, reg.Register(graylb.NewInstance("svc", h, p, nil)))
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	for _, n := range []int{0, 1, 2, 5} {
		client := &http.Client{Transport: NewTransport(lb, WithMaxRetries(n))}
		for range 10 {
			got, err := call(client, http.MethodGet, "svc", "false", "")
			require.Error(t, err, "retries %d: a prod GET answered %q", n, got)
			assert.Contains(t, err.Error(), "connection refused")
			var ce *ConnectionError
			require.ErrorAs(t, err, &ce)
			assert.Len(t, ce.Tried, min(n+1, 3), "each prod instance once, at most 1+retries")
			if n+1 > 3 {
				assert.Equal(t, "no other instance can serve a prod request", ce.Reason)
			}
		}
		got, err := call(client, http.MethodGet, "svc", "true", "")
		require.NoError(t, err)
		require.Equal(t, "gray", got)
	}
}
