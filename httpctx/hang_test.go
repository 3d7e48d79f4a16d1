package httpctx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/require"
)

// blackHole is a listener that accepts connections and never answers: a
// gray instance that hangs. It returns the instance registered for it.
func blackHole(t testing.TB, reg *graylb.Registry, service string, md map[string]string) graylb.Instance {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, write nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	p := l.Addr().(*net.TCPAddr).Port
	in := graylb.NewInstance(service, "127.0.0.1", p, md)
	require.NoError(t, reg.Register(in))
	return in
}

// tally counts requests by outcome after a point in time.
type tally struct {
	from             time.Time
	gray, grayFailed atomic.Int64
	prod, prodOnGray atomic.Int64
	prodFailed       atomic.Int64
}

// drive sends gray and prod requests from several goroutines, each with
// its own deadline, until stop, and tallies those that start after
// tl.from. A prod request answered by a gray backend ("gray" body) counts
// in prodOnGray.
func drive(t *testing.T, client *http.Client, deadline time.Duration, tl *tally, stop <-chan struct{}) {
	t.Helper()
	var wg sync.WaitGroup
	one := func(gray bool) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
			req.Header.Set("gray", strconv.FormatBool(gray))
			resp, err := client.Do(req)
			body := ""
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				}
			}
			cancel()
			if start.Before(tl.from) {
				continue
			}
			if gray {
				tl.gray.Add(1)
				if err != nil {
					tl.grayFailed.Add(1)
					t.Logf("gray request started %v after the hang failed: %v", start.Sub(tl.from.Add(-5*time.Second)), err)
				}
				continue
			}
			tl.prod.Add(1)
			if err != nil {
				tl.prodFailed.Add(1)
			}
			if body == "gray" {
				tl.prodOnGray.Add(1)
			}
		}
	}
	for range 6 {
		wg.Add(1)
		go one(true)
	}
	for range 2 {
		wg.Add(1)
		go one(false)
	}
	wg.Wait()
}

func answering(body string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
}

// TestTransport_HangingGrayInstance: a gray instance that accepts
// connections and never answers (a black hole), or answers after twice
// the deadline, beside 2 prod instances, alone or beside a working gray
// one, under round robin and P2C, with default outlier detection and a
// 1 s client deadline. From 5 s after the hang starts at most 1 % of gray
// requests fail, and no prod request reaches gray.
func TestTransport_HangingGrayInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 7 s per variant")
	}
	const deadline = time.Second
	gray := map[string]string{"gray": "true"}
	for _, hang := range []string{"blackhole", "slow"} {
		for _, beside := range []bool{false, true} {
			for _, pol := range []string{"roundrobin", "p2c"} {
				name := hang + "/alone/" + pol
				if beside {
					name = hang + "/beside-working-gray/" + pol
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					reg := graylb.NewRegistry()
					for range 2 {
						p := answering("prod")
						defer p.Close()
						register(t, reg, "svc", p, nil)
					}
					if beside {
						g := answering("gray")
						defer g.Close()
						register(t, reg, "svc", g, gray)
					}
					opts := []graylb.Option{graylb.WithContextHandler(Handler()), graylb.WithOutlierDetection(graylb.OutlierConfig{})}
					if pol == "p2c" {
						opts = append(opts, graylb.WithPolicy(policy.P2C()))
					}
					lb, err := graylb.New(reg, opts...)
					require.NoError(t, err)
					defer lb.Close()
					client := &http.Client{Transport: NewTransport(lb)}
					defer client.CloseIdleConnections()

					start := time.Now()
					if hang == "blackhole" {
						blackHole(t, reg, "svc", gray)
					} else {
						release := make(chan struct{})
						slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							select {
							case <-time.After(2 * deadline):
							case <-release:
							}
							io.WriteString(w, "gray")
						}))
						defer slow.Close()
						defer close(release)
						register(t, reg, "svc", slow, gray)
					}
					tl := &tally{from: start.Add(5 * time.Second)}
					stop := make(chan struct{})
					time.AfterFunc(7*time.Second-time.Since(start), func() { close(stop) })
					drive(t, client, deadline, tl, stop)

					t.Logf("%s from 5 s: %d of %d gray requests failed; %d of %d prod failed, %d on gray", name,
						tl.grayFailed.Load(), tl.gray.Load(), tl.prodFailed.Load(), tl.prod.Load(), tl.prodOnGray.Load())
					require.LessOrEqual(t, tl.grayFailed.Load()*100, tl.gray.Load(), "more than 1 % of gray requests failed from 5 s after the hang started")
					require.Greater(t, tl.gray.Load(), int64(50), "too few gray requests to measure")
					require.Zero(t, tl.prodOnGray.Load(), "prod requests reached gray")
					require.LessOrEqual(t, tl.prodFailed.Load()*100, tl.prod.Load(), "more than 1 % of prod requests failed") // healthy instances: a loaded machine's odd late answer at most
				})
			}
		}
	}
}
