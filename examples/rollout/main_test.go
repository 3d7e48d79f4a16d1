package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/shadow"
)

// syncBuffer is an io.Writer for concurrent handlers and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveBuild runs a build of fault as an instance of svc in reg.
func serveBuild(t *testing.T, reg *graylb.Registry, fault string, gray bool) *syncBuffer {
	t.Helper()
	out := &syncBuffer{}
	b, err := newBuild(fault, gray, out)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p, _ := strconv.Atoi(port)
	if err := reg.Register(graylb.NewInstance("svc", host, p, map[string]string{"gray": strconv.FormatBool(gray)})); err != nil {
		t.Fatal(err)
	}
	return out
}

// Each fault breaks the calls a user makes the way its description says,
// as the caller counts them: through graylb's Transport, with a deadline
// the body is read within.
func TestFaultsAsTheCallerSeesThem(t *testing.T) {
	for _, tc := range []struct {
		fault string
		path  string
		calls int
		want  []string // each call's failure ("" succeeded, byProd: sent again to prod and succeeded), in order
	}{
		{"", "/users", 2, []string{"", ""}},
		{"errors", "/users", 5, []string{"", "", "", "", "HTTP 500"}},
		{"slow", "/users", 1, []string{""}},
		{"hang", "/users", 1, []string{"no answer within the deadline"}},
		{"stalled-body", "/users", 1, []string{"body not whole within the deadline"}},
		{"reset-body", "/users", 1, []string{"body broken off"}},
		{"broken-endpoint", "/users", 1, []string{""}},
		{"broken-endpoint", "/search", 2, []string{"HTTP 500", "HTTP 500"}},
		{"gray-requests", "/users", 1, []string{"HTTP 500"}},
		// A GET answered 429 is sent once more to an instance not tried:
		// here the prod one, as a gray request falls back to prod.
		{"overloaded", "/users", 2, []string{"", byProd}},
		{"crash", "/users", 1, []string{""}},
		{"differ5", "/users", 20, []string{"", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""}},
	} {
		t.Run(tc.fault+tc.path, func(t *testing.T) {
			reg := graylb.NewRegistry()
			serveBuild(t, reg, "", false)
			serveBuild(t, reg, tc.fault, true)
			lb, err := graylb.New(reg)
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			c := callerConfig{service: "svc", deadline: 500 * time.Millisecond}
			client := &http.Client{Transport: httpctx.NewTransport(lb)}
			tl := newTally()
			start := time.Now()
			for i, want := range tc.want {
				call(context.Background(), c, client, tl, true, tc.path)
				r := tl.report(start.Truncate(time.Second), time.Now().Add(time.Second), lb, "svc")
				failed := want != "" && want != byProd
				if got := r.Gray.Failed; failed != (got > failedBefore(tc.want[:i])) {
					t.Fatalf("call %d: %d failed so far (%v), want failure %q", i+1, got, r.Failures, want)
				}
				if failed && r.Failures[want] == 0 {
					t.Fatalf("call %d: failures %v, want %q", i+1, r.Failures, want)
				}
				if byGray := i + 1 - count(tc.want[:i+1], byProd); r.Gray.ServedByGray+countPrefix(r.Failures, "no answer") != byGray || r.Gray.ServedByProd != i+1-byGray {
					t.Fatalf("call %d: %+v, want %d calls answered by the gray instance, the rest by prod", i+1, r.Gray, byGray)
				}
			}
		})
	}
}

// byProd in a want list: the call was sent again to the prod instance and
// succeeded there.
const byProd = "served by prod"

func failedBefore(want []string) int {
	n := 0
	for _, w := range want {
		if w != "" && w != byProd {
			n++
		}
	}
	return n
}

func count(want []string, w string) int {
	n := 0
	for _, x := range want {
		if x == w {
			n++
		}
	}
	return n
}

func countPrefix(m map[string]int, prefix string) int {
	n := 0
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// A gray instance logs a prod request it receives, and its answers name
// its kind and the kind of request it read.
func TestGrayInstanceLogsProdRequests(t *testing.T) {
	out := &syncBuffer{}
	b, err := newBuild("", true, out)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	defer srv.Close()
	for _, gray := range []string{"true", ""} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/users", nil)
		if gray != "" {
			req.Header.Set("gray", gray)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := map[string]string{"true": "gray", "": "prod"}[gray]
		if k, r := resp.Header.Get(headerInstanceKind), resp.Header.Get(headerRequestKind); k != "gray" || r != want {
			t.Errorf("gray header %q: Instance-Kind %q, Request-Kind %q; want gray, %s", gray, k, r, want)
		}
	}
	if n := strings.Count(out.String(), "prod request on a gray instance"); n != 1 {
		t.Errorf("%d prod requests logged, want 1:\n%s", n, out.String())
	}
}

func TestUnknownFaultRefused(t *testing.T) {
	if _, err := newBuild("typo", true, &syncBuffer{}); err == nil || !strings.Contains(err.Error(), `"typo"`) {
		t.Fatalf("got %v, want an error naming the fault", err)
	}
}

// The builds seen through a shadow phase: every unmarked GET mirrored to
// the gray build, its answers compared with prod's. A build identical to
// prod never differs (its answers' request id and time stamp differ from
// prod's on every answer: learned as noise); differ5 differs by body in 1
// of its 20 answers.
func TestBuildsInAShadowPhase(t *testing.T) {
	for _, tc := range []struct {
		fault   string
		differs int
	}{{"", 0}, {"differ5", 10}} {
		t.Run(tc.fault, func(t *testing.T) {
			reg := graylb.NewRegistry()
			serveBuild(t, reg, "", false)
			serveBuild(t, reg, "", false)
			serveBuild(t, reg, tc.fault, true)
			events := make(chan shadow.Event, 1024)
			lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}),
				shadow.WithObserver(func(e shadow.Event) { events <- e }))
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			c := callerConfig{service: "svc", deadline: 5 * time.Second}
			client := &http.Client{Transport: httpctx.NewTransport(lb)}
			tl := newTally()
			const calls = 200
			for i := range calls {
				call(context.Background(), c, client, tl, false, endpoints[i%len(endpoints)])
			}
			got := map[shadow.Outcome]int{}
			byBody, other := 0, 0 // differing by body; by anything else (latency, on a loaded machine)
			for n := 0; n < calls; {
				select {
				case e := <-events:
					if e.Outcome == shadow.Noise {
						continue
					}
					got[e.Outcome]++
					n++
					switch {
					case e.Body:
						byBody++
					case e.Outcome == shadow.Differs && !e.Latency:
						other++
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("%d of %d copies told: %v", n, calls, got)
				}
			}
			if byBody != tc.differs || other != 0 || got[shadow.Same]+got[shadow.Differs] != calls {
				t.Fatalf("copies %v (%d differing by body, %d by status), want %d differing by body, none otherwise but by latency", got, byBody, other, tc.differs)
			}
			if r := tl.report(time.Unix(0, 0), time.Now().Add(time.Second), lb, "svc"); r.Unmarked.Failed != 0 || r.Unmarked.ServedByGray != 0 {
				t.Fatalf("the users saw %+v: no failure, and no answer from gray", r.Unmarked)
			}
		})
	}
}
