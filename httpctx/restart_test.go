package httpctx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
)

// serveOn starts an HTTP server answering body on addr ("127.0.0.1:0" for
// any port).
func serveOn(t testing.TB, addr, body string) *httptest.Server {
	t.Helper()
	var l net.Listener
	var err error
	require.Eventually(t, func() bool { l, err = net.Listen("tcp", addr); return err == nil }, 5*time.Second, 10*time.Millisecond,
		"listening on %s (the port is being released)", addr)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	return srv
}

// TestTransport_OnlyProdInstanceRestartedServesAgainAtOnce: the only prod
// instance, with outlier detection on (30 s ejection time), goes down until
// its failures eject it and comes back on its address. Ejection does not
// keep it away: it serves again within 1 s of its return, and no request
// fails from 2 s after it.
func TestTransport_OnlyProdInstanceRestartedServesAgainAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 s")
	}
	reg := graylb.NewRegistry()
	srv := serveOn(t, "127.0.0.1:0", "prod")
	addr := srv.Listener.Addr().String()
	register(t, reg, "svc", srv, nil)
	g := answering("gray")
	defer g.Close()
	register(t, reg, "svc", g, map[string]string{"gray": "true"})
	var ejected atomic.Int64
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithOutlierDetection(graylb.OutlierConfig{
		OnEjection: func(e graylb.Ejection) {
			if e.For > 0 {
				ejected.Add(1)
			}
		},
	}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	defer client.CloseIdleConnections()

	type result struct {
		at  time.Time
		err error
	}
	var mu sync.Mutex
	var results []result
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
				resp, err := client.Do(req)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if string(b) != "prod" {
						err = errors.New("answered by " + string(b))
					}
				}
				cancel()
				mu.Lock()
				results = append(results, result{time.Now(), err})
				mu.Unlock()
			}
		}()
	}
	// answered counts the requests answered after since, and those that
	// ended after since without failing.
	answered := func(since time.Time) (all, ok int) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.at.After(since) {
				all++
				if r.err == nil {
					ok++
				}
			}
		}
		return all, ok
	}
	require.Eventually(t, func() bool { _, ok := answered(time.Time{}); return ok >= 20 }, 10*time.Second, time.Millisecond,
		"the instance never served before it went down")
	srv.Close()
	require.Eventually(t, func() bool { return ejected.Load() > 0 }, 10*time.Second, time.Millisecond,
		"its failures while down never ejected it: the test proves nothing")
	back := time.Now()
	srv = serveOn(t, addr, "prod")
	defer srv.Close()
	// The requests from 2 s after its return, which must all succeed.
	require.Eventually(t, func() bool { all, _ := answered(back.Add(2 * time.Second)); return all >= 500 }, 30*time.Second, 10*time.Millisecond,
		"500 requests from 2 s after its return")
	close(stop)
	wg.Wait()

	require.Positive(t, ejected.Load(), "its failures while down never ejected it: the test proves nothing")
	var firstOK time.Time
	var late, lateFailed int
	for _, r := range results {
		if r.at.After(back) && r.err == nil && (firstOK.IsZero() || r.at.Before(firstOK)) {
			firstOK = r.at
		}
		if r.at.After(back.Add(2 * time.Second)) {
			late++
			if r.err != nil {
				lateFailed++
				t.Log(r.err)
			}
		}
	}
	t.Logf("first success %v after its return; from 2 s after: %d of %d failed", firstOK.Sub(back), lateFailed, late)
	require.False(t, firstOK.IsZero(), "it never served again")
	require.LessOrEqual(t, firstOK.Sub(back), time.Second, "it served again only after 1 s")
	require.Zero(t, lateFailed)
	require.Greater(t, late, 100)
}
