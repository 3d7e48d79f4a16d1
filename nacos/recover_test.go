package nacos

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// httpFake is a fakeNaming that can read lists over HTTP: down says the
// connection is down, httpHosts is what the HTTP API answers (httpErr
// its failure), and gate, when set, holds each read until it receives
// (the read answers what the server had when it began).
type httpFake struct {
	*fakeNaming
	down      atomic.Bool
	hmu       sync.Mutex
	httpHosts []model.Instance
	httpErr   error
	gate      chan struct{}
	reads     atomic.Int64
	checks    atomic.Int64 // calls of healthy: the catch-up asks once a period
}

func (f *httpFake) healthy() bool { f.checks.Add(1); return !f.down.Load() }

// waitPeriods waits until n whole periods of the catch-up ran: it asks
// healthy at the start of each.
func (f *httpFake) waitPeriods(t *testing.T, n int) {
	t.Helper()
	want := f.checks.Load() + int64(n) + 1
	require.Eventually(t, func() bool { return f.checks.Load() >= want }, 5*time.Second, time.Millisecond, "%d periods of the catch-up", n)
}

func (f *httpFake) listOverHTTP(ctx context.Context, _, _ string, _ []string) ([]model.Instance, error) {
	f.hmu.Lock()
	gate, hosts, err := f.gate, f.httpHosts, f.httpErr // the server's state as the read reaches it
	f.hmu.Unlock()
	f.reads.Add(1)
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return hosts, err
}

func (f *httpFake) setHTTP(hosts []model.Instance, err error) {
	f.hmu.Lock()
	f.httpHosts, f.httpErr = hosts, err
	f.hmu.Unlock()
}

func recoverConfig(every time.Duration) *config {
	c := noReconcile()
	c.recoverEvery = every
	return c
}

// lists records what a watcher got.
type lists struct {
	mu  sync.Mutex
	got [][]graylb.Instance
}

func (l *lists) add(in []graylb.Instance) { l.mu.Lock(); l.got = append(l.got, in); l.mu.Unlock() }

func (l *lists) snapshot() [][]graylb.Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]graylb.Instance(nil), l.got...)
}

// While the connection is down the Supplier reads the lists over HTTP
// and hands over one that changed; while it is up it reads nothing.
func TestSupplier_CatchesUpOverHTTPWhileDisconnected(t *testing.T) {
	one := []model.Instance{host(1, true, true, 1, nil)}
	two := []model.Instance{host(1, true, true, 1, nil), host(2, true, true, 1, nil)}
	f := &httpFake{fakeNaming: &fakeNaming{hosts: one}}
	f.setHTTP(two, nil)
	s := newSupplier(f, recoverConfig(10*time.Millisecond))
	defer s.Close()
	var l lists
	_, err := s.Watch("svc", l.add)
	require.NoError(t, err)
	f.subscribed[0].SubscribeCallback(one, nil)

	f.waitPeriods(t, 10) // ten periods while connected: no read may happen
	assert.Zero(t, f.reads.Load(), "reads over HTTP while connected")
	require.Len(t, l.snapshot(), 1)

	f.down.Store(true)
	require.Eventually(t, func() bool { return len(l.snapshot()) == 2 }, 5*time.Second, 5*time.Millisecond,
		"the list read over HTTP was not handed over")
	assert.Len(t, l.snapshot()[1], 2)
	f.waitPeriods(t, 5) // more periods: the same list is not handed over again
	assert.Len(t, l.snapshot(), 2, "an unchanged list handed over again")
}

// A read over HTTP that began before a push is older than it: it is
// never handed over after it.
func TestSupplier_HTTPReadNeverOverridesANewerPush(t *testing.T) {
	one := []model.Instance{host(1, true, true, 1, nil)}
	older := []model.Instance{host(1, true, true, 1, nil), host(2, true, true, 1, nil)}
	newer := []model.Instance{host(3, true, true, 1, nil)}
	f := &httpFake{fakeNaming: &fakeNaming{hosts: one}, gate: make(chan struct{})}
	f.setHTTP(older, nil)
	f.down.Store(true)
	s := newSupplier(f, recoverConfig(10*time.Millisecond))
	defer s.Close()
	var l lists
	_, err := s.Watch("svc", l.add)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.reads.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "no read began")
	f.subscribed[0].SubscribeCallback(newer, nil) // the push arrives while the read is held
	f.gate <- struct{}{}                          // the read answers the older list
	f.hmu.Lock()
	f.gate = nil // later reads answer at once, with the list the server now has
	f.httpHosts = newer
	f.hmu.Unlock()
	before := f.reads.Load()
	require.Eventually(t, func() bool { return f.reads.Load() > before+2 }, 5*time.Second, 5*time.Millisecond, "the loop stopped")
	got := l.snapshot()
	require.Len(t, got, 1, "only the push: the older read and the unchanged later ones are not handed over")
	assert.Equal(t, 3, got[0][0].Port)
}

// While the server cannot be reached a round ends at its first failed
// read: one request a period, whatever the number of services.
func TestSupplier_FailedHTTPReadEndsTheRound(t *testing.T) {
	f := &httpFake{fakeNaming: &fakeNaming{}}
	f.setHTTP(nil, ErrUnavailable)
	s := newSupplier(f, recoverConfig(time.Hour))
	defer s.Close()
	var l lists
	for _, svc := range []string{"a", "b", "c"} {
		_, err := s.Watch(svc, l.add)
		require.NoError(t, err)
	}
	s.refresh(f.listOverHTTP, time.Second, true, "test")
	assert.EqualValues(t, 1, f.reads.Load())
	assert.Empty(t, l.snapshot(), "a failed read handed over a list")

	f.setHTTP([]model.Instance{host(1, true, true, 1, nil)}, nil)
	s.refresh(f.listOverHTTP, time.Second, true, "test")
	assert.EqualValues(t, 4, f.reads.Load(), "the server answers: every service is read")
	assert.Len(t, l.snapshot(), 3)
}

// Close ends a read in flight (a stopped server answers nothing) at once.
func TestSupplier_CloseEndsAnHTTPRead(t *testing.T) {
	f := &httpFake{fakeNaming: &fakeNaming{}, gate: make(chan struct{})}
	f.down.Store(true)
	s := newSupplier(f, recoverConfig(5*time.Millisecond))
	_, err := s.Watch("svc", func([]graylb.Instance) {})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.reads.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "no read began")
	start := time.Now()
	require.NoError(t, s.Close())
	assert.Less(t, time.Since(start), recoverTimeout/2, "Close waited for the read")
}

// A Client's HTTP lister refuses what is not the list asked for.
func TestHTTPLister_RefusesBadAnswers(t *testing.T) {
	const good = `{"name":"DEFAULT_GROUP@@svc","hosts":[{"ip":"10.0.0.1","port":80,"weight":1,"healthy":true,"enabled":true,"metadata":{"gray":"true"}}]}`
	for _, tc := range []struct {
		name, body string
		status     int
		want       string // "" for success
	}{
		{"grouped name", good, 200, ""},
		{"plain name", strings.Replace(good, "DEFAULT_GROUP@@svc", "svc", 1), 200, ""},
		{"another service", strings.Replace(good, "@@svc", "@@other", 1), 200, "names service"},
		{"server error", good, 500, "status 500"},
		{"forbidden", `{"message":"no token"}`, 403, "status 403"},
		{"junk", `<html>`, 200, "answer"},
		{"truncated", good[:40], 200, "answer"},
		{"empty", ``, 200, "answer"},
		{"wrong types", `{"name":"DEFAULT_GROUP@@svc","hosts":[{"port":"eighty"}]}`, 200, "answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			l, err := newHTTPLister(newConfig(nil))
			require.NoError(t, err)
			svc, err := l.get(context.Background(), srv.URL+"/nacos/v1/ns/instance/list?accessToken=secret-token", "svc", "DEFAULT_GROUP@@svc")
			if tc.want == "" {
				require.NoError(t, err)
				require.Len(t, svc.Hosts, 1)
				assert.Equal(t, "true", svc.Hosts[0].Metadata["gray"])
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "secret-token")
		})
	}
}

// A failed connection's error does not quote the URL (it holds the
// access token), and a read honours its context.
func TestHTTPLister_ErrorsHoldNoTokenAndHonourCtx(t *testing.T) {
	l, err := newHTTPLister(newConfig(nil))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	url := srv.URL
	srv.Close() // nothing listens there now
	_, err = l.get(context.Background(), url+"/x?accessToken=secret-token", "svc", "DEFAULT_GROUP@@svc")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret-token")

	hang := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer stalled.Close()
	defer close(hang)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.get(ctx, stalled.URL+"/x", "svc", "DEFAULT_GROUP@@svc")
	require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	assert.Less(t, time.Since(start), 2*time.Second)
}

// The lister follows no redirect: the access token in the query would
// reach the redirect's target (in the Referer header, and in the query
// when the target keeps it), another host maybe.
func TestHTTPLister_FollowsNoRedirect(t *testing.T) {
	var reached atomic.Int64
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		leaked.Store(r.Header.Get("Referer") + " " + r.URL.RawQuery)
		w.Write([]byte(`{"name":"DEFAULT_GROUP@@svc","hosts":[]}`))
	}))
	defer other.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
	}))
	defer redirecting.Close()
	l, err := newHTTPLister(newConfig(nil))
	require.NoError(t, err)
	_, err = l.get(context.Background(), redirecting.URL+"/nacos/v1/ns/instance/list?accessToken=secret-token", "svc", "DEFAULT_GROUP@@svc")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "status 302")
	assert.NotContains(t, err.Error(), "secret-token")
	assert.Zero(t, reached.Load(), "the redirect was followed; the target saw %v", leaked.Load())
}

// A server that keeps answering over HTTP while the SDK's connection
// stays down past the patience (its gRPC port unreachable from here) is
// read at the slow pace, with one warning; the pace comes back once the
// connection has been up.
func TestSupplier_CatchUpSlowsWhenOnlyHTTPAnswers(t *testing.T) {
	f := &httpFake{fakeNaming: &fakeNaming{}}
	f.setHTTP([]model.Instance{host(1, true, true, 1, nil)}, nil)
	f.down.Store(true)
	c := recoverConfig(5 * time.Millisecond)
	c.recoverPatience, c.recoverSlow = 100*time.Millisecond, time.Hour
	var logs lockedBuffer
	c.logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := newSupplier(f, c)
	defer s.Close()
	_, err := s.Watch("svc", func([]graylb.Instance) {})
	require.NoError(t, err)

	// Past the patience: the warning, then the slow pace.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "gRPC port") }, 5*time.Second, time.Millisecond,
		"no warning past the patience")
	settled := f.reads.Load()
	require.Greater(t, settled, int64(5), "the catch-up never read at its pace")
	f.waitPeriods(t, 40) // twice the patience, at the slow pace
	assert.LessOrEqual(t, f.reads.Load(), settled+1, "still reading at the fast pace past the patience")
	assert.Equal(t, 1, strings.Count(logs.String(), "gRPC port"), "one warning: %s", logs.String())

	f.down.Store(false)
	f.waitPeriods(t, 3) // up for a few periods
	f.down.Store(true)
	before := f.reads.Load()
	require.Eventually(t, func() bool { return f.reads.Load() > before+5 }, 5*time.Second, 5*time.Millisecond,
		"the pace did not come back after the connection was up")
}

// The HTTP reads take the server's scheme, as the SDK's login does: http
// unless its ServerConfig says https, whatever WithTLS says of the gRPC
// connection.
func TestServerURL_TakesTheServersScheme(t *testing.T) {
	assert.Equal(t, "http://127.0.0.1:8848/nacos", serverURL(constant.ServerConfig{IpAddr: "127.0.0.1", Port: 8848, ContextPath: "/nacos"}))
	assert.Equal(t, "https://[::1]:8848/nacos", serverURL(constant.ServerConfig{Scheme: "https", IpAddr: "::1", Port: 8848, ContextPath: "/nacos"}))
	c := newConfig([]Option{WithServers("127.0.0.1:8848"), WithTLS(constant.TLSConfig{Enable: true})})
	p, err := c.params()
	require.NoError(t, err)
	require.NotEmpty(t, p.ServerConfigs)
	assert.Equal(t, "http://127.0.0.1:8848/nacos", serverURL(p.ServerConfigs[0]), "WithTLS changed the scheme of the HTTP reads")
}
