package httpctx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/shadow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// events collects a LoadBalancer's shadow events.
type events struct {
	mu  sync.Mutex
	all []shadow.Event
	ch  chan shadow.Event
}

func newEvents() *events { return &events{ch: make(chan shadow.Event, 1024)} }

func (e *events) observe(ev shadow.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default:
	}
}

// count waits until n events of outcomes come (or fails) and returns them
// by outcome.
func (e *events) count(t *testing.T, n int, outcomes ...shadow.Outcome) map[shadow.Outcome]int {
	t.Helper()
	want := map[shadow.Outcome]bool{}
	for _, o := range outcomes {
		want[o] = true
	}
	got := map[shadow.Outcome]int{}
	total := 0
	deadline := time.After(10 * time.Second)
	for total < n {
		select {
		case ev := <-e.ch:
			if len(want) == 0 || want[ev.Outcome] {
				got[ev.Outcome]++
				total++
			}
		case <-deadline:
			t.Fatalf("%d of %d shadow events came: %v", total, n, got)
		}
	}
	return got
}

// jsonInstance registers an instance of svc answering body(r) as JSON with
// status, counting its calls and whether each came marked shadow.
type jsonInstance struct {
	calls, shadowed atomic.Int64
}

func startJSON(t *testing.T, reg *graylb.Registry, service string, gray bool, status int, body func(*http.Request) any, slow time.Duration) *jsonInstance {
	t.Helper()
	in := &jsonInstance{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.calls.Add(1)
		if r.Header.Get(adapter.ShadowKey) == "true" {
			in.shadowed.Add(1)
		}
		if slow > 0 {
			select {
			case <-time.After(slow): // must sleep: the slow instance's latency is what the test is about
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body(r))
	}))
	t.Cleanup(srv.Close)
	var md map[string]string
	if gray {
		md = map[string]string{"gray": "true"}
	}
	register(t, reg, service, srv, md)
	return in
}

func getBody(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

var stamp atomic.Int64

// noisy is an answer with a field that differs on every call (a time
// stamp) beside the payload.
func noisy(payload string) func(*http.Request) any {
	return func(*http.Request) any { return map[string]any{"payload": payload, "ts": stamp.Add(1)} }
}

// Every mirrored GET is answered by prod alone: the copy goes to the gray
// instance, marked, its answer compared and never returned; a field that
// differs between prod answers (a time stamp) is learned as noise from
// second prod answers and not counted against gray. A POST is not
// mirrored; a share of 0 mirrors nothing.
func TestShadow_MirrorsComparesAndNeverReturnsTheCopy(t *testing.T) {
	reg := graylb.NewRegistry()
	prod := startJSON(t, reg, "svc", false, 200, noisy("p"), 0)
	gray := startJSON(t, reg, "svc", true, 200, noisy("p"), 0)
	ev := newEvents()
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(ev.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithMirror(shadow.WithNoiseSample(1)))}
	for range 20 {
		status, body := getBody(t, client, "http://svc/items/42")
		require.Equal(t, 200, status)
		require.Contains(t, body, `"payload":"p"`)
	}
	got := ev.count(t, 20, shadow.Same, shadow.Differs, shadow.Failed)
	assert.Equal(t, map[shadow.Outcome]int{shadow.Same: 20}, got, "the time stamp is noise: two prod answers differ there")
	assert.EqualValues(t, 20, gray.calls.Load())
	assert.EqualValues(t, 20, gray.shadowed.Load(), "every copy carries the mark")
	assert.EqualValues(t, 40, prod.calls.Load(), "the primary and the second prod answer")
	assert.Zero(t, prod.shadowed.Load())
	for _, e := range ev.all {
		if e.Outcome == shadow.Same {
			assert.Equal(t, "GET /items/*", e.Route)
		}
	}

	resp, err := client.Post("http://svc/items", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, lb.SetRules(graylb.Rules{}))
	getBody(t, client, "http://svc/items/42")
	assert.EqualValues(t, 20, gray.calls.Load(), "a POST and a share of 0 mirror nothing")
}

// A gray build whose answers differ is seen: by status, and by body at the
// paths that differ.
func TestShadow_Differences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		payload string
		check   func(*testing.T, shadow.Event)
	}{
		{"status", 500, "p", func(t *testing.T, e shadow.Event) { assert.True(t, e.Status) }},
		{"body", 200, "q", func(t *testing.T, e shadow.Event) {
			assert.True(t, e.Body)
			assert.Equal(t, []string{"payload"}, e.Paths)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			startJSON(t, reg, "svc", false, 200, noisy("p"), 0)
			startJSON(t, reg, "svc", true, tc.status, noisy(tc.payload), 0)
			ev := newEvents()
			lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(ev.observe))
			require.NoError(t, err)
			defer lb.Close()
			client := &http.Client{Transport: NewTransport(lb, WithMirror(shadow.WithIgnore("ts")))}
			status, _ := getBody(t, client, "http://svc/")
			require.Equal(t, 200, status, "the copy's answer is never returned")
			got := ev.count(t, 1, shadow.Same, shadow.Differs)
			require.Equal(t, 1, got[shadow.Differs])
			ev.mu.Lock()
			defer ev.mu.Unlock()
			for _, e := range ev.all {
				if e.Outcome == shadow.Differs {
					tc.check(t, e)
				}
			}
			assert.Len(t, shadow.Diffs(lb), 1)
		})
	}
}

// A copy never delays its primary: a gray build ten times slower than the
// primary's deadline allows leaves every primary answered fast; copies
// beyond the concurrency bound are dropped and told.
func TestShadow_NeverDelaysThePrimary(t *testing.T) {
	reg := graylb.NewRegistry()
	startJSON(t, reg, "svc", false, 200, noisy("p"), 0)
	startJSON(t, reg, "svc", true, 200, noisy("p"), 2*time.Second)
	ev := newEvents()
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(ev.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithMirror(shadow.WithConcurrency(2), shadow.WithNoiseSample(0)))}
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
		resp, err := client.Do(req)
		require.NoError(t, err, "the primary is not delayed by its copy")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
	}
	got := ev.count(t, 8, shadow.Dropped)
	assert.Equal(t, 8, got[shadow.Dropped], "2 copies in flight at most")
}

// Containment: a shadow copy's handler that POSTs downstream reaches no
// instance (an error wrapping shadow.ErrWrite, told as a blocked write); its
// GET downstream goes to a gray instance only, and fails rather than reach
// prod where the service has none. AllowWrites lets a dry-run call through.
// An untrusted caller cannot set the mark.
func TestShadow_ContainmentOnTheNextHop(t *testing.T) {
	reg := graylb.NewRegistry()
	ledgerProd := startJSON(t, reg, "ledger", false, 200, noisy("l"), 0)
	ledgerGray := startJSON(t, reg, "ledger", true, 200, noisy("l"), 0)
	auditProd := startJSON(t, reg, "audit", false, 200, noisy("a"), 0)
	ev := newEvents()
	lb, err := graylb.New(reg, shadow.WithObserver(ev.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	var results sync.Map
	handler := Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		post, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://ledger/entries", strings.NewReader("{}"))
		_, perr := client.Do(post)
		results.Store("post", perr)
		dry, _ := http.NewRequestWithContext(shadow.AllowWrites(ctx), http.MethodPost, "http://ledger/dry-run", strings.NewReader("{}"))
		if resp, err := client.Do(dry); err == nil {
			resp.Body.Close()
			results.Store("dry", resp.StatusCode)
		} else {
			results.Store("dry", err)
		}
		get, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://ledger/entries", nil)
		if resp, err := client.Do(get); err == nil {
			resp.Body.Close()
		}
		audit, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://audit/", nil)
		_, aerr := client.Do(audit)
		results.Store("audit", aerr)
		results.Store("is", shadow.Is(ctx))
	}))
	srv := httptest.NewServer(handler)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set(adapter.ShadowKey, "true")
	req.Header.Set("gray", "true")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	perr, _ := results.Load("post")
	assert.ErrorIs(t, perr.(error), shadow.ErrWrite)
	var we *shadow.WriteError
	assert.True(t, errors.As(perr.(error), &we))
	dry, _ := results.Load("dry")
	assert.Equal(t, 200, dry, "AllowWrites lets the dry run through, to gray")
	aerr, _ := results.Load("audit")
	assert.ErrorIs(t, aerr.(error), graylb.ErrNoInstance, "no gray audit: the shadow call fails, never reaching prod")
	is, _ := results.Load("is")
	assert.Equal(t, true, is)
	assert.Zero(t, ledgerProd.calls.Load(), "no shadow call reached a prod instance")
	assert.Zero(t, auditProd.calls.Load())
	assert.EqualValues(t, 2, ledgerGray.calls.Load(), "the dry run and the GET, to gray")
	assert.EqualValues(t, 2, ledgerGray.shadowed.Load(), "the mark travels")
	assert.Equal(t, 1, ev.count(t, 1, shadow.BlockedWrite)[shadow.BlockedWrite])

	// An untrusted caller's mark is deleted at the edge.
	edge := httptest.NewServer(Middleware(lb, WithTrusted(func(*http.Request) bool { return false }))(handler))
	defer edge.Close()
	req, _ = http.NewRequest(http.MethodGet, edge.URL, nil)
	req.Header.Set(adapter.ShadowKey, "true")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	is, _ = results.Load("is")
	assert.Equal(t, false, is)
	perr, _ = results.Load("post")
	assert.NoError(t, errOrNil(perr))
}

func errOrNil(v any) error {
	if err, ok := v.(error); ok {
		return err
	}
	return nil
}

// A build identical to prod whose answers carry a field that differs on
// every answer (a request id) is never found differing, on any route, from
// its first copy: a route's copies are also sent to a second prod instance
// until two prod answers of it have been compared, so the noise is learned
// before a copy is compared without one.
func TestShadow_NoiseLearnedBeforeARouteIsCompared(t *testing.T) {
	reg := graylb.NewRegistry()
	startJSON(t, reg, "svc", false, 200, noisy("p"), 0)
	startJSON(t, reg, "svc", false, 200, noisy("p"), 0)
	startJSON(t, reg, "svc", true, 200, noisy("p"), 0)
	ev := newEvents()
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(ev.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)} // the noise sample at its default, 0.2
	const routes, each = 10, 10
	for i := range routes * each {
		status, _ := getBody(t, client, fmt.Sprintf("http://svc/r%c/", 'a'+i%routes))
		require.Equal(t, 200, status)
	}
	got := ev.count(t, routes*each, shadow.Same, shadow.Differs, shadow.Failed, shadow.Dropped)
	assert.Zero(t, got[shadow.Differs]+got[shadow.Failed], "%v", got)
	assert.Less(t, got[shadow.Dropped], 10, "%v: a copy is dropped only when 16 are in flight", got)
}

// A noise sample (the mirrored request sent to prod again) is contained as
// a copy is: the prod handler that serves it reads prod downstream, its
// writes are refused, and nothing it calls is mirrored again. A chain
// orders (prod and gray; each GET POSTs to ledger, then GETs from it) →
// ledger (prod and gray), every GET mirrored and sampled: the ledger gets
// one POST per user request. Before the noise sample was marked it wrote
// again: 40 POSTs for 20 user requests.
func TestShadow_NoiseSampleWritesNothing(t *testing.T) {
	reg := graylb.NewRegistry()
	type ledgerCounts struct{ posts, gets, sampled, shadowed atomic.Int64 }
	ledger := func(gray bool) *ledgerCounts {
		c := &ledgerCounts{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				c.posts.Add(1)
			} else {
				c.gets.Add(1)
			}
			switch r.Header.Get(adapter.ShadowKey) {
			case adapter.SampleValue:
				c.sampled.Add(1)
			case "true":
				c.shadowed.Add(1)
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"balance":7,"ts":%d}`, stamp.Add(1))
		}))
		t.Cleanup(srv.Close)
		var md map[string]string
		if gray {
			md = map[string]string{"gray": "true"}
		}
		register(t, reg, "ledger", srv, md)
		return c
	}
	prodLedger, grayLedger := ledger(false), ledger(true)
	ev := newEvents()
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(ev.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithMirror(shadow.WithNoiseSample(1)))}
	var reads atomic.Int64
	for _, gray := range []bool{false, true} {
		srv := httptest.NewServer(Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			post, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://ledger/views", strings.NewReader("{}"))
			if resp, err := client.Do(post); err == nil {
				resp.Body.Close()
			} else if !errors.Is(err, shadow.ErrWrite) {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			get, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://ledger/balance", nil)
			if resp, err := client.Do(get); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				reads.Add(1)
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"order":42}`)
		})))
		t.Cleanup(srv.Close)
		var md map[string]string
		if gray {
			md = map[string]string{"gray": "true"}
		}
		register(t, reg, "orders", srv, md)
	}
	const users = 20
	for range users {
		status, _ := getBody(t, client, "http://orders/orders/42")
		require.Equal(t, 200, status)
	}
	// The users' GETs of orders and the prod orders' GETs of ledger are
	// mirrored; nothing else is.
	got := ev.count(t, 4*users, shadow.Same, shadow.Differs, shadow.Failed, shadow.Dropped, shadow.BlockedWrite)
	assert.Equal(t, map[shadow.Outcome]int{shadow.Same: 2 * users, shadow.BlockedWrite: 2 * users}, got,
		"every copy the same as prod's answer; the copies' POSTs and the samples', each refused")
	assert.EqualValues(t, users, prodLedger.posts.Load()+grayLedger.posts.Load(), "one POST per user request reached the ledger")
	assert.EqualValues(t, users, prodLedger.posts.Load())
	assert.EqualValues(t, 3*users, prodLedger.gets.Load(), "the users' reads, their samples, and the orders samples' reads (not mirrored again)")
	assert.EqualValues(t, 2*users, prodLedger.sampled.Load())
	assert.Zero(t, prodLedger.shadowed.Load(), "no shadow copy reached prod")
	assert.EqualValues(t, 2*users, grayLedger.gets.Load(), "the copies of the users' reads and the orders copies' reads")
	assert.EqualValues(t, 2*users, grayLedger.shadowed.Load())
	assert.EqualValues(t, 3*users, reads.Load())
}

// A copy's write is refused whatever it is sent to: a service without a
// gray instance (it failed as no instance before, not told as a blocked
// write), and a host that is not a service (an external API: it went out).
func TestShadow_WritesRefusedBeforeRouting(t *testing.T) {
	reg := graylb.NewRegistry()
	ledger := startJSON(t, reg, "ledger", false, 200, noisy("l"), 0)
	var external atomic.Int64
	ext := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { external.Add(1) }))
	defer ext.Close()
	ev := newEvents()
	lb, err := graylb.New(reg, shadow.WithObserver(ev.observe))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	ctx := adapter.ShadowCopy(context.Background())
	for _, url := range []string{"http://ledger/views", ext.URL + "/charges"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		_, err := client.Do(req)
		assert.ErrorIs(t, err, shadow.ErrWrite, url)
	}
	assert.Equal(t, 2, ev.count(t, 2, shadow.BlockedWrite)[shadow.BlockedWrite])
	assert.Zero(t, ledger.calls.Load())
	assert.Zero(t, external.Load())
}
