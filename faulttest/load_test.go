package faulttest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// requestTimeout bounds each request of the load: above the 2 s latency
// fault, so a request to a slow instance is slow, not failed, and below
// the plan's fault durations, so a request a fault holds fails.
const requestTimeout = 3 * time.Second

// loadPeriod is the time between two requests of one stream: 25 a second
// per stream, each sent on a goroutine of its own so a slow answer does
// not slow the load.
const loadPeriod = 40 * time.Millisecond

// The streams of a load.
const (
	streamGray  = iota // gray: true
	streamProd         // gray: false
	streamProbe        // no gray header, the user the rules change names: prod, then gray once the rules apply
	streams
)

// record is one request of a load.
type record struct {
	stream      int
	start, done time.Time
	answer      string // "<instance> <kind>"
	err         error
}

func (r record) gray() bool            { return strings.HasSuffix(r.answer, " gray") }
func (r record) from(name string) bool { return strings.HasPrefix(r.answer, name+" ") }

// sender sends one GET, gray or prod or with a user id, and returns the
// answer.
type sender func(ctx context.Context, stream int, user string) (string, error)

// httpSender sends GET http://<service>/ through client.
func httpSender(client *http.Client, service string) sender {
	return func(ctx context.Context, stream int, user string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+service+"/", nil)
		if err != nil {
			return "", err
		}
		switch stream {
		case streamGray:
			req.Header.Set("gray", "true")
		case streamProd:
			req.Header.Set("gray", "false")
		default:
			req.Header.Set("uid", user)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return string(b), err
	}
}

// load sends the gray, prod and probe streams every loadPeriod until
// finish, and records every request.
type load struct {
	send  sender
	probe atomic.Pointer[string] // the probe stream's user id
	stop  chan struct{}
	once  sync.Once // closes stop
	done  sync.WaitGroup
	mu    sync.Mutex
	recs  []record
}

// startLoad starts a load; the end of the test stops it if finish has
// not.
func startLoad(t *testing.T, send sender, probeUser string) *load {
	l := &load{send: send, stop: make(chan struct{})}
	t.Cleanup(func() { l.once.Do(func() { close(l.stop) }) })
	l.probe.Store(&probeUser)
	for s := 0; s < streams; s++ {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			tick := time.NewTicker(loadPeriod)
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				l.done.Add(1)
				go l.one(s)
			}
		}()
	}
	return l
}

func (l *load) one(stream int) {
	defer l.done.Done()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r := record{stream: stream, start: time.Now()}
	r.answer, r.err = l.send(ctx, stream, *l.probe.Load())
	r.done = time.Now()
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

// first returns the record, among those that ended so far, that ended
// first of those satisfying ok.
func (l *load) first(ok func(record) bool) (record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best record
	found := false
	for _, r := range l.recs {
		if ok(r) && (!found || r.done.Before(best.done)) {
			best, found = r, true
		}
	}
	return best, found
}

// waitUntil waits until every condition has a record satisfying it, or
// until deadline; it returns the first record of each (the zero record
// for one that never came).
func (l *load) waitUntil(deadline time.Time, conds ...func(record) bool) []record {
	out := make([]record, len(conds))
	got := make([]bool, len(conds))
	poll(time.Until(deadline), 20*time.Millisecond, func() bool {
		all := true
		for i, c := range conds {
			if !got[i] {
				out[i], got[i] = l.first(c)
				all = all && got[i]
			}
		}
		return all
	})
	return out
}

// steadyRequests is how many requests of each stream end in the load's
// steady state before a fault and after recovery: about half a second
// (loadPeriod).
const steadyRequests = 12

// steady lets the load run on until steadyRequests more requests of each
// stream ended.
func (l *load) steady(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	from := len(l.recs)
	l.mu.Unlock()
	if !poll(time.Minute, 20*time.Millisecond, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		var n [streams]int
		for _, r := range l.recs[from:] {
			n[r.stream]++
		}
		for _, k := range n {
			if k < steadyRequests {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the load did not end %d requests of each stream within a minute", steadyRequests)
	}
}

// poll calls cond every tick until it holds or within passes, and reports
// whether it held.
func poll(within, tick time.Duration, cond func() bool) bool {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for deadline := time.After(within); !cond(); {
		select {
		case <-ticker.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

// finish stops the load, waits for the requests in flight (each bounded
// by requestTimeout) and returns every record.
func (l *load) finish(t *testing.T) []record {
	l.once.Do(func() { close(l.stop) })
	done := make(chan struct{})
	go func() { l.done.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * requestTimeout):
		t.Fatalf("requests still in flight %v after the load stopped", 2*requestTimeout)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs
}
