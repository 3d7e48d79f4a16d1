package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
)

// A fault is one way a build breaks.
type fault struct {
	name string
	what string
}

// faults are the ways a gray build breaks that -fault selects.
var faults = []fault{
	{"", "none: the build answers as prod does"},
	{"errors", "20 % of calls answer 500"},
	{"slow", "every call takes three times as long"},
	{"hang", "no call is answered (the connection stays open)"},
	{"stalled-body", "200 and the headers at once, then the body at 1 byte a second"},
	{"reset-body", "200 and half the body, then the connection is reset"},
	{"broken-endpoint", "one endpoint of five (/search) always answers 500"},
	{"gray-requests", "every request with gray: true answers 500"},
	{"overloaded", "half the calls answer 429 with Retry-After: 1"},
	{"crash", "the process exits -crash-after after its start, without deregistering"},
	{"differ5", "one answer in 20 has a field of its body changed (200, on time)"},
}

// build is an instance's handler: the service, as the build -fault names
// answers it.
type build struct {
	kind         string // prod or gray
	fault        fault
	out          io.Writer
	calls        atomic.Int64
	prodRequests atomic.Int64 // prod requests a gray instance received
	mu           sync.Mutex   // serialises out
}

func newBuild(name string, gray bool, out io.Writer) (*build, error) {
	i := slices.IndexFunc(faults, func(f fault) bool { return f.name == name })
	if i < 0 {
		return nil, fmt.Errorf("-fault %q: not one of the faults -h lists", name)
	}
	return &build{kind: kindName(gray), fault: faults[i], out: out}, nil
}

func (b *build) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestGray := graylb.IsGray(r.Header.Get(graylb.DefaultGrayHeader))
	if b.kind == graylb.Gray.String() && !requestGray {
		n := b.prodRequests.Add(1)
		b.mu.Lock()
		fmt.Fprintf(b.out, "prod request on a gray instance: %s %s (gray header %q), %d so far\n", r.Method, r.URL.Path, r.Header.Get(graylb.DefaultGrayHeader), n)
		b.mu.Unlock()
	}
	w.Header().Set(headerInstanceKind, b.kind)
	w.Header().Set(headerRequestKind, kindName(requestGray))
	if !slices.Contains(endpoints, r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	n := b.calls.Add(1)
	work := serviceTime()
	switch b.fault.name {
	case "hang":
		<-r.Context().Done()
		return
	case "overloaded":
		if n%2 == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "overloaded", http.StatusTooManyRequests)
			return
		}
	case "slow":
		work *= 3
	}
	if !wait(r, work) {
		return
	}
	switch {
	case b.fault.name == "errors" && n%5 == 0,
		b.fault.name == "broken-endpoint" && r.URL.Path == "/search",
		b.fault.name == "gray-requests" && requestGray:
		http.Error(w, "gray build failure", http.StatusInternalServerError)
		return
	}
	body := bodyOf(r.URL.Path, n, b.fault.name == "differ5" && n%20 == 0)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	switch b.fault.name {
	case "stalled-body":
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for i := range body {
			if _, err := w.Write(body[i : i+1]); err != nil || rc.Flush() != nil || !wait(r, time.Second) {
				return
			}
		}
	case "reset-body":
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		rc := http.NewResponseController(w)
		rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with a reset
			}
			conn.Close()
		}
	default:
		w.Write(body)
	}
}

// wait waits d, or until the request ends; it reports whether d passed.
func wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
