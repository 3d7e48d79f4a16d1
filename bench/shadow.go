package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/shadow"
)

// ShadowSetup is the measurement of what mirroring costs the prod
// request: an open-loop load of Rate GETs a second through httpctx's
// Transport to two prod and one gray loopback servers (each answering
// BodySize bytes of JSON with a time stamp), in Rounds rounds of Round at
// each share, the shares taking turns (0, Share, 0, Share, ...) so that
// the machine's drift falls on both alike.
type ShadowSetup struct {
	Rate     int
	Round    time.Duration
	Rounds   int
	Share    float64 // the shadow share compared with 0
	BodySize int
}

// ShadowResult is what the prod requests of one share saw, over all its
// rounds: their latency from the call to the end of the body's read, and
// the process' CPU time (user and system) per request.
type ShadowResult struct {
	Share         float64
	Requests      int
	Errors        int
	P50, P99      time.Duration
	CPUPerRequest time.Duration
	// Copies are the copies the mirror told of (any outcome but
	// blocked-write and noise); NotSame those that were not the same.
	Copies, NotSame int
}

// RunShadowOverhead runs s and returns the results of share 0 and of
// s.Share.
func RunShadowOverhead(s ShadowSetup) ([2]ShadowResult, error) {
	var res [2]ShadowResult
	res[0].Share, res[1].Share = 0, s.Share
	reg := graylb.NewRegistry()
	var servers []*httptest.Server
	defer func() {
		for _, srv := range servers {
			srv.Close()
		}
	}()
	pad := strings.Repeat("x", max(s.BodySize-80, 0))
	var n atomic.Int64
	for _, gray := range []bool{false, false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":%d,"servedAt":%d,"pad":%q}`, n.Add(1), time.Now().UnixNano(), pad)
		}))
		servers = append(servers, srv)
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		var md map[string]string
		if gray {
			md = map[string]string{"gray": "true"}
		}
		if err := reg.Register(graylb.NewInstance("svc", host, p, md)); err != nil {
			return res, err
		}
	}
	var copies, notSame atomic.Int64
	lb, err := graylb.New(reg, shadow.WithObserver(func(e shadow.Event) {
		switch e.Outcome {
		case shadow.BlockedWrite, shadow.Noise:
			return
		case shadow.Same:
		default:
			notSame.Add(1)
		}
		copies.Add(1)
	}))
	if err != nil {
		return res, err
	}
	defer lb.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 256}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}

	lat := [2][]time.Duration{}
	cpu := [2]time.Duration{}
	for round := range 2 * s.Rounds {
		i := round % 2
		if err := lb.SetRules(graylb.Rules{ShadowPercent: res[i].Share}); err != nil {
			return res, err
		}
		runtime.GC() // each round starts from a collected heap
		cpuStart := processCPU()
		l, errs := openLoop(client, s.Rate, s.Round)
		// The round's copies end after their primaries: wait until no more
		// come (polled), so that their CPU is the round's.
		for last, deadline := int64(-1), time.Now().Add(5*time.Second); copies.Load() != last && time.Now().Before(deadline); {
			last = copies.Load()
			time.Sleep(20 * time.Millisecond)
		}
		cpu[i] += processCPU() - cpuStart
		lat[i] = append(lat[i], l...)
		res[i].Errors += errs
	}
	res[1].Copies, res[1].NotSame = int(copies.Load()), int(notSame.Load())
	for i := range res {
		l := lat[i]
		sort.Slice(l, func(a, b int) bool { return l[a] < l[b] })
		res[i].Requests = len(l)
		if len(l) > 0 {
			res[i].P50, res[i].P99 = l[len(l)*50/100], l[len(l)*99/100]
			res[i].CPUPerRequest = cpu[i] / time.Duration(len(l))
		}
	}
	return res, nil
}

// openLoop sends rate GETs a second for d, whether or not the earlier ones
// were answered, and returns each one's latency and the errors.
func openLoop(client *http.Client, rate int, d time.Duration) ([]time.Duration, int) {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start, sent := time.Now(), 0
	for time.Since(start) < d {
		<-tick.C
		for due := int(time.Since(start).Seconds() * float64(rate)); sent < due; sent++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://svc/items/42", nil)
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				el := time.Since(t0)
				mu.Lock()
				lat = append(lat, el)
				if err != nil {
					errs++
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return lat, errs
}

// ShadowTable is BENCHMARKS.md's rows of the measurement.
func ShadowTable(s ShadowSetup, rs [2]ShadowResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| shadow share | requests | errors | p50 | × share 0 | p99 | × share 0 | CPU per request | copies compared (not the same) |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for i, r := range rs {
		p50x, p99x := "1.00", "1.00"
		copies := "-"
		if i > 0 {
			p50x, p99x = ratio(r.P50, rs[0].P50), ratio(r.P99, rs[0].P99)
			copies = fmt.Sprintf("%d (%d)", r.Copies, r.NotSame)
		}
		fmt.Fprintf(&b, "| %v %% | %d | %d | %s | %s | %s | %s | %s | %s |\n", r.Share, r.Requests, r.Errors,
			r.P50.Round(time.Microsecond), p50x, r.P99.Round(time.Microsecond), p99x, r.CPUPerRequest.Round(100*time.Nanosecond), copies)
	}
	return b.String()
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}
