package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/go-kratos/kratos/v2/selector/p2c"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/policy"
)

// LatencySetup is the latency comparison: Backends loopback HTTP servers,
// the last one answering Slow later than the others; Clients goroutines
// each sending one request after another for Duration.
type LatencySetup struct {
	Backends int
	Slow     time.Duration
	Clients  int
	Duration time.Duration
}

// LatencyResult is what one policy did under the load.
type LatencyResult struct {
	Name      string
	Requests  int
	Errors    int
	SlowShare float64 // of the requests, the share the slow backend served
	P50, P99  time.Duration
}

// latencyFixture is the backends and their registry.
type latencyFixture struct {
	reg   *graylb.Registry
	slow  string // the slow backend's host:port
	addrs []string
	close func()
}

func newLatencyFixture(s LatencySetup) (*latencyFixture, error) {
	f := &latencyFixture{reg: graylb.NewRegistry()}
	var servers []*httptest.Server
	f.close = func() {
		for _, srv := range servers {
			srv.Close()
		}
	}
	for i := 0; i < s.Backends; i++ {
		slow := i == s.Backends-1
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow {
				time.Sleep(s.Slow) // the slow backend's extra latency
			}
			io.WriteString(w, "ok")
		}))
		servers = append(servers, srv)
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		if err := f.reg.Register(graylb.NewInstance("svc", host, p, nil)); err != nil {
			f.close()
			return nil, err
		}
		addr := srv.Listener.Addr().String()
		f.addrs = append(f.addrs, addr)
		if slow {
			f.slow = addr
		}
	}
	return f, nil
}

// sendFunc sends one request and returns the address that served it.
type sendFunc func(ctx context.Context) (string, error)

// RunLatency runs the same load through graylb round robin, graylb P2C and
// Kratos' p2c, one after the other, over the same backends.
func RunLatency(s LatencySetup) ([]LatencyResult, error) {
	f, err := newLatencyFixture(s)
	if err != nil {
		return nil, err
	}
	defer f.close()
	base := &http.Transport{MaxIdleConnsPerHost: s.Clients, MaxConnsPerHost: 0}
	defer base.CloseIdleConnections()

	graylbSend := func(policy policy.Policy) (sendFunc, func(), error) {
		lb, err := graylb.New(f.reg, graylb.WithContextHandler(httpctx.Handler()), graylb.WithPolicy(policy))
		if err != nil {
			return nil, nil, err
		}
		client := &http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}
		return func(ctx context.Context) (string, error) {
			var served string
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
			resp, err := client.Do(req)
			if err != nil {
				return "", err
			}
			served = resp.Request.URL.Host // the clone the Transport sent
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return served, err
		}, func() { lb.Close() }, nil
	}
	kratosSend := func() (sendFunc, func(), error) {
		sel := p2c.NewBuilder().Build()
		nodes := make([]selector.Node, len(f.addrs))
		for i, a := range f.addrs {
			nodes[i] = selector.NewNode("http", a, &registry.ServiceInstance{ID: a, Name: "svc"})
		}
		sel.Apply(nodes)
		client := &http.Client{Transport: base}
		return func(ctx context.Context) (string, error) {
			n, done, err := sel.Select(ctx)
			if err != nil {
				return "", err
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Address()+"/", nil)
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done(ctx, selector.DoneInfo{Err: err})
			return n.Address(), err
		}, func() {}, nil
	}

	var out []LatencyResult
	for _, peer := range []struct {
		name  string
		build func() (sendFunc, func(), error)
	}{
		{"graylb round robin", func() (sendFunc, func(), error) { return graylbSend(policy.RoundRobin()) }},
		{"graylb P2C (peak EWMA)", func() (sendFunc, func(), error) { return graylbSend(policy.P2C()) }},
		{"kratos p2c", kratosSend},
	} {
		send, stop, err := peer.build()
		if err != nil {
			return nil, err
		}
		r := runLoad(s, f.slow, send)
		stop()
		r.Name = peer.name
		out = append(out, r)
	}
	return out, nil
}

// runLoad runs s.Clients closed-loop clients for s.Duration.
func runLoad(s LatencySetup, slow string, send sendFunc) LatencyResult {
	ctx := context.Background()
	deadline := time.Now().Add(s.Duration)
	var mu sync.Mutex
	var lat []time.Duration
	var res LatencyResult
	slowN := 0
	var wg sync.WaitGroup
	for c := 0; c < s.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			errs, slows := 0, 0
			for time.Now().Before(deadline) {
				start := time.Now()
				addr, err := send(ctx)
				mine = append(mine, time.Since(start))
				if err != nil {
					errs++
				}
				if addr == slow {
					slows++
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			res.Errors += errs
			slowN += slows
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.Requests = len(lat)
	if len(lat) > 0 {
		res.SlowShare = float64(slowN) / float64(len(lat))
		res.P50 = lat[len(lat)*50/100]
		res.P99 = lat[len(lat)*99/100]
	}
	return res
}

// LatencyTable writes the results as a markdown table.
func LatencyTable(s LatencySetup, rs []LatencyResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d loopback HTTP backends, one answering %v later; %d closed-loop clients for %v per policy.\n\n",
		s.Backends, s.Slow, s.Clients, s.Duration)
	fmt.Fprintf(&b, "| policy | requests | errors | slow backend's share | p50 | p99 |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f %% | %s | %s |\n", r.Name, r.Requests, r.Errors, 100*r.SlowShare,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
	}
	return b.String()
}
