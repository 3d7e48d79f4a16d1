package httpctx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/require"
)

// instance is a loopback instance of svc whose handler answers with
// answer's status (and Retry-After, when it sets one), counting its calls.
type instance struct {
	calls atomic.Int64
}

func startInstance(t *testing.T, reg *graylb.Registry, gray bool, answer func(r *http.Request, w http.ResponseWriter) int) *instance {
	t.Helper()
	in := &instance{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.calls.Add(1)
		w.WriteHeader(answer(r, w))
	}))
	t.Cleanup(srv.Close)
	var md map[string]string
	if gray {
		md = map[string]string{"gray": "true"}
	}
	register(t, reg, "svc", srv, md)
	return in
}

func answers(status int) func(*http.Request, http.ResponseWriter) int {
	return func(*http.Request, http.ResponseWriter) int { return status }
}

// sendN makes n requests (gray ones with "gray: true") and returns how many
// of those after the first skip did not answer 200.
func sendN(t *testing.T, client *http.Client, gray bool, n, skip int) (failed int) {
	t.Helper()
	for i := range n {
		req, err := http.NewRequest("GET", "http://svc/", nil)
		require.NoError(t, err)
		if gray {
			req.Header.Set("gray", "true")
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && i >= skip {
			failed++
		}
	}
	return failed
}

// A gray build that fails on two or three instances beside working prod
// ones: every gray instance is ejected whatever the ejection cap, and gray
// requests fall back to prod. (It failed every gray request: the cap and
// the panic threshold kept the broken gray instances in rotation.)
func TestTransport_BrokenGrayBuildOnSeveralInstancesFallsBack(t *testing.T) {
	for _, grays := range []int{2, 3} {
		t.Run(strconv.Itoa(grays), func(t *testing.T) {
			reg := graylb.NewRegistry()
			for range 2 {
				startInstance(t, reg, false, answers(200))
			}
			for range grays {
				startInstance(t, reg, true, answers(503))
			}
			lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
			require.NoError(t, err)
			defer lb.Close()
			client := &http.Client{Transport: NewTransport(lb)}
			// 5 failures per gray instance eject it: none after the first 40.
			require.Zero(t, sendN(t, client, true, 400, 40))
			require.Zero(t, sendN(t, client, false, 100, 0))
		})
	}
}

// No gray instance, and a prod instance that answers 503 to gray-marked
// requests only: it is taken out for gray requests (each prod success
// between them reset its count of failures in a row, so it never was),
// and still serves prod ones.
func TestTransport_InstanceFailingOneKindOfRequest(t *testing.T) {
	reg := graylb.NewRegistry()
	startInstance(t, reg, false, answers(200))
	bad := startInstance(t, reg, false, func(r *http.Request, _ http.ResponseWriter) int {
		if r.Header.Get("gray") == "true" {
			return 503
		}
		return 200
	})
	startInstance(t, reg, false, answers(200))
	lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	failed := 0
	for i := range 300 {
		if sendN(t, client, true, 1, 0) > 0 && i >= 30 {
			failed++
		}
		require.Zero(t, sendN(t, client, false, 1, 0))
	}
	require.Zero(t, failed, "gray requests failed after the first 30")
	before := bad.calls.Load()
	require.Zero(t, sendN(t, client, false, 30, 0))
	require.Greater(t, bad.calls.Load(), before, "it still serves prod requests")
}

// An instance failing a fifth of its calls while its peers fail none is
// ejected by its failure rate (never five failures in a row).
func TestTransport_InstanceFailingAFifthIsEjected(t *testing.T) {
	reg := graylb.NewRegistry()
	var n atomic.Int64
	bad := startInstance(t, reg, false, func(*http.Request, http.ResponseWriter) int {
		if n.Add(1)%5 == 0 {
			return 500
		}
		return 200
	})
	startInstance(t, reg, false, answers(200))
	startInstance(t, reg, false, answers(200))
	lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	sendN(t, client, false, 300, 0)
	before := bad.calls.Load()
	require.Zero(t, sendN(t, client, false, 300, 0))
	require.Equal(t, before, bad.calls.Load(), "ejected within its first 100 calls")
}

// An instance answering 429 with Retry-After to everything, beside a
// healthy one, gets at most a tenth of the calls once it said so, with
// P2C (a fast refusal looked cheapest: it got 85 %) and with round robin
// (50 %): its Retry-After takes it out of rotation.
func TestTransport_OverloadedInstanceAttractsNoTraffic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy policy.Policy
	}{{"p2c", policy.P2C()}, {"round-robin", policy.RoundRobin()}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			busy := startInstance(t, reg, false, func(_ *http.Request, w http.ResponseWriter) int {
				w.Header().Set("Retry-After", "30")
				return http.StatusTooManyRequests
			})
			startInstance(t, reg, false, answers(200))
			lb, err := graylb.New(reg, graylb.WithPolicy(tc.policy), graylb.WithOutlierDetection(graylb.OutlierConfig{}))
			require.NoError(t, err)
			defer lb.Close()
			client := &http.Client{Transport: NewTransport(lb)}
			sendN(t, client, false, 20, 0)
			before := busy.calls.Load()
			sendN(t, client, false, 500, 0)
			t.Logf("the overloaded instance got %d of 500 calls", busy.calls.Load()-before)
			require.LessOrEqual(t, busy.calls.Load()-before, int64(50))
		})
	}
}

// An idempotent request answered 429 is sent once more to an instance not
// tried yet, as after a lost connection (Envoy's retry on 429): beside a
// healthy instance, no GET fails, whatever the policy draws; a POST gets
// the 429. (Each 429 failed its request: 2 % of gray requests for a gray
// build that sheds half its calls.)
func TestTransport_OverloadedAnswerIsSentElsewhere(t *testing.T) {
	reg := graylb.NewRegistry()
	var n atomic.Int64
	startInstance(t, reg, false, func(_ *http.Request, w http.ResponseWriter) int {
		if n.Add(1)%2 == 0 {
			w.Header().Set("Retry-After", "1")
			return http.StatusTooManyRequests
		}
		return 200
	})
	startInstance(t, reg, false, answers(200))
	lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}
	require.Zero(t, sendN(t, client, false, 200, 0), "GET answered 429 by one instance")

	// A POST is not sent again: it gets the 429.
	reg2 := graylb.NewRegistry()
	busy := startInstance(t, reg2, false, answers(http.StatusTooManyRequests))
	other := startInstance(t, reg2, false, answers(200))
	lb2, err := graylb.New(reg2, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.NoError(t, err)
	defer lb2.Close()
	client2 := &http.Client{Transport: NewTransport(lb2)}
	statuses := map[int]int{}
	for range 2 { // round robin: one of the two meets the busy instance
		resp, err := client2.Post("http://svc/", "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	require.Equal(t, map[int]int{200: 1, 429: 1}, statuses)
	require.EqualValues(t, 1, busy.calls.Load())
	require.EqualValues(t, 1, other.calls.Load())
}
