package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
)

func TestJudge(t *testing.T) {
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond}
	nan := math.NaN()
	fast := func(n int) []bucket {
		return histOf(n, func(i int) float64 { return 0.020 + 0.020*float64(i%100)/100 })
	}
	slow := func(n int) []bucket {
		return histOf(n, func(i int) float64 { return 3 * (0.020 + 0.020*float64(i%100)/100) })
	}
	for _, tc := range []struct {
		name       string
		gray, prod sample
		want       verdict
		reason     string
	}{
		{"too few gray calls", sample{99, 50, nil}, sample{1000, 0, nil}, verdictWait, "at least 100"},
		{"no gray calls", sample{0, 0, nil}, sample{1000, 0, nil}, verdictWait, "0 calls"},
		{"NaN gray calls", sample{nan, nan, nil}, sample{1000, 0, nil}, verdictWait, "0 calls"},
		{"Inf gray calls", sample{math.Inf(1), 5, nil}, sample{1000, 0, nil}, verdictWait, "0 calls"},
		{"negative gray calls", sample{-500, 0, nil}, sample{1000, 0, nil}, verdictWait, ""},
		{"equal", sample{200, 2, fast(200)}, sample{2000, 20, fast(2000)}, verdictHealthy, "no evidence"},
		{"20% errors", sample{200, 40, fast(200)}, sample{2000, 2, fast(2000)}, verdictUnhealthy, "20.00%"},
		{"within the increase", sample{1000, 19, nil}, sample{1000, 10, nil}, verdictHealthy, ""},
		{"a point beyond the increase, not yet beyond chance", sample{1000, 21, nil}, sample{1000, 10, nil}, verdictHealthy, ""},
		{"ten points beyond the increase", sample{1000, 120, nil}, sample{1000, 10, nil}, verdictUnhealthy, "12.00%"},
		{"prod fails as much", sample{1000, 200, nil}, sample{1000, 200, nil}, verdictHealthy, ""},
		{"errors above calls", sample{100, 1e9, nil}, sample{1000, 0, nil}, verdictUnhealthy, "100 of 100"},
		{"three times slower", sample{200, 0, slow(200)}, sample{2000, 0, fast(2000)}, verdictUnhealthy, "gray"},
		{"slow within slack", sample{200, 0, histOf(200, func(int) float64 { return 0.008 })}, sample{2000, 0, histOf(2000, func(int) float64 { return 0.001 })}, verdictHealthy, ""},
		{"no prod histogram", sample{200, 0, slow(200)}, sample{2000, 0, nil}, verdictHealthy, "latency not compared"},
		{"no prod to compare: clean gray", sample{500, 2, fast(500)}, sample{3, 0, nil}, verdictHealthy, "taken as 0"},
		{"no prod to compare: failing gray", sample{500, 100, nil}, sample{0, 0, nil}, verdictUnhealthy, "taken as 0"},
		{"no prod to compare: latency unjudged", sample{500, 0, slow(500)}, sample{0, 0, nil}, verdictHealthy, "latency not compared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, why := judge(tc.gray, tc.prod, th)
			if v != tc.want || !strings.Contains(why, tc.reason) {
				t.Fatalf("judge = %v %q, want %v with %q", v, why, tc.want, tc.reason)
			}
		})
	}
	t.Run("latency check off", func(t *testing.T) {
		off := th
		off.MaxLatencyRatio = 0
		if v, why := judge(sample{200, 0, slow(200)}, sample{2000, 0, fast(2000)}, off); v != verdictHealthy {
			t.Fatalf("%v %s", v, why)
		}
	})
}

// tailOf is n calls over otelgraylb's buckets, the slowest in each hundred
// taking k × 40 ms, the others 20 to 40 ms.
func tailOf(n int, k float64) []bucket {
	return histOf(n, func(i int) float64 {
		if i%100 == 99 {
			return k * 0.040
		}
		return 0.020 + 0.020*float64(i%100)/100
	})
}

// The tail test over a step's checks: a slower tail rolls back after
// FailureLimit checks in a row that find it, never at one check however
// clear; a stall's cluster of slow calls, which the later checks of the
// step still hold, rolls back never.
func TestStepJudgeTail(t *testing.T) {
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond, FailureLimit: 2}
	t.Run("a tail three times longer, over checks enough to see it", func(t *testing.T) {
		j := newStepJudge(th)
		for c := 1; c <= 10; c++ {
			v, why := j.check(sample{Requests: float64(500 * c), Buckets: tailOf(500*c, 3)}, sample{Requests: float64(2000 * c), Buckets: tailOf(2000*c, 1)})
			switch {
			case v == verdictUnhealthy && c < 2:
				t.Fatalf("rolled back at check %d: %s", c, why)
			case v == verdictUnhealthy:
				if !strings.Contains(why, "took longer than") {
					t.Fatalf("rolled back at check %d, not on the tail: %s", c, why)
				}
				t.Logf("rolled back at check %d: %s", c, why)
				return
			}
		}
		t.Fatal("a tail three times longer was never rolled back")
	})
	t.Run("a stall's slow calls, however clear in one check", func(t *testing.T) {
		// The case of a healthy build rolled back on a loaded machine: 8
		// of gray's 622 calls took longer than prod's p99 × 1.5 + 10 ms,
		// all of them ended by one stall; the step's later checks hold them
		// too.
		fast := func(i int) float64 { return 0.020 + 0.020*float64(i%100)/100 }
		j := newStepJudge(th)
		for c := 1; c <= 20; c++ {
			n := 62 * c
			gray := histOf(n, fast)
			if c >= 10 {
				gray = histOf(n+8, func(i int) float64 {
					if i >= n {
						return 0.4
					}
					return fast(i)
				})
			}
			v, why := j.check(sample{Requests: countOf(spans(gray)), Buckets: gray}, sample{Requests: float64(600 * c), Buckets: histOf(600*c, fast)})
			if c == 10 {
				if v0, why0 := judge(sample{Requests: countOf(spans(gray)), Buckets: gray}, sample{Requests: float64(600 * c), Buckets: histOf(600*c, fast)}, th); v0 == verdictUnhealthy {
					t.Errorf("one check holding the stall's calls alone judged %v: %s", v0, why0)
				}
			}
			if v == verdictUnhealthy || v == verdictWorse {
				t.Fatalf("check %d: %v: %s", c, v, why)
			}
		}
	})
}

// histOf is the cumulative histogram, over otelgraylb's buckets, of n calls
// the i-th of which took at(i) seconds.
func histOf(n int, at func(i int) float64) []bucket {
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, math.Inf(1)}
	out := make([]bucket, len(bounds))
	for k, b := range bounds {
		out[k].Le = b
	}
	for i := 0; i < n; i++ {
		d := at(i)
		for k := range out {
			if d <= out[k].Le {
				out[k].Count++
			}
		}
	}
	return out
}

func TestStepJudgeNeedsChecksInARow(t *testing.T) {
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond, FailureLimit: 2}
	j := newStepJudge(th)
	worse := sample{Requests: 300, Errors: 14} // 4.7 %: evidence at 1 %, not beyond doubt
	prod := sample{Requests: 3000, Errors: 15}
	if v, why := judge(worse, prod, th); v != verdictWorse {
		t.Fatalf("the fixture is %v (%s), want worse", v, why)
	}
	if v, _ := j.check(worse, prod); v != verdictWorse {
		t.Fatalf("first check %v, want worse", v)
	}
	if v, _ := j.check(sample{Requests: 300, Errors: 3}, prod); v != verdictHealthy {
		t.Fatalf("a clean check %v, want healthy", v)
	}
	if v, _ := j.check(worse, prod); v != verdictWorse {
		t.Fatalf("a worse check after a clean one %v, want worse (the streak starts over)", v)
	}
	if v, why := j.check(worse, prod); v != verdictUnhealthy {
		t.Fatalf("second worse check in a row %v (%s), want unhealthy", v, why)
	}
}

// Property: more gray errors never turn an unhealthy verdict healthy.
func TestJudgeMonotonic(t *testing.T) {
	th := thresholds{MinRequests: 10, MaxErrorIncrease: 0.02, MaxLatencyRatio: 2}
	for errs := 0.0; errs < 200; errs++ {
		v1, _ := judge(sample{200, errs, nil}, sample{500, 5, nil}, th)
		v2, _ := judge(sample{200, errs + 1, nil}, sample{500, 5, nil}, th)
		if v1 > v2 {
			t.Fatalf("%v errors %v, %v errors %v", errs, v1, errs+1, v2)
		}
	}
}

func Example_judge() {
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond}
	prod := sample{Requests: 5000, Errors: 5}
	fmt.Println(judge(sample{Requests: 40, Errors: 8}, prod, th))
	fmt.Println(judge(sample{Requests: 400, Errors: 80}, prod, th))
	fmt.Println(judge(sample{Requests: 400, Errors: 1}, prod, th))
	// Output:
	// wait gray completed 40 calls in the step, at least 100 needed to judge
	// unhealthy gray error ratio 20.00% (80 of 400 calls) vs prod's 0.10% (5000 calls), allowed 1.00 points more (p = < 0.000001)
	// healthy no evidence gray is worse: error ratio 0.25% over 400 calls vs prod's 0.10% (5000 calls), latency not compared (no histogram for both kinds)
}

func Example_queriesFor() {
	q := queriesFor(defaultMetric, []string{"user-service"}, 5*time.Minute)
	fmt.Println(q.requests)
	fmt.Println(q.errors)
	fmt.Println(q.buckets)
	fmt.Println(queriesFor(defaultMetric, []string{"user-service", "orders.http"}, time.Minute).requests)
	// Output:
	// sum by (graylb_service, graylb_kind) (((graylb_client_call_duration_seconds_count{graylb_service="user-service"} unless graylb_client_call_duration_seconds_count{graylb_service="user-service"} offset 300s) and on (job, instance) group by (job, instance) (graylb_client_call_duration_seconds_count offset 300s)) or increase(graylb_client_call_duration_seconds_count{graylb_service="user-service"}[300s]))
	// sum by (graylb_service, graylb_kind) (((graylb_client_call_duration_seconds_count{graylb_service="user-service",graylb_call_outcome="error"} unless graylb_client_call_duration_seconds_count{graylb_service="user-service",graylb_call_outcome="error"} offset 300s) and on (job, instance) group by (job, instance) (graylb_client_call_duration_seconds_count offset 300s)) or increase(graylb_client_call_duration_seconds_count{graylb_service="user-service",graylb_call_outcome="error"}[300s]))
	// sum by (graylb_service, graylb_kind, le) (((graylb_client_call_duration_seconds_bucket{graylb_service="user-service"} unless graylb_client_call_duration_seconds_bucket{graylb_service="user-service"} offset 300s) and on (job, instance) group by (job, instance) (graylb_client_call_duration_seconds_count offset 300s)) or increase(graylb_client_call_duration_seconds_bucket{graylb_service="user-service"}[300s]))
	// sum by (graylb_service, graylb_kind) (((graylb_client_call_duration_seconds_count{graylb_service=~"user-service|orders\\.http"} unless graylb_client_call_duration_seconds_count{graylb_service=~"user-service|orders\\.http"} offset 60s) and on (job, instance) group by (job, instance) (graylb_client_call_duration_seconds_count offset 60s)) or increase(graylb_client_call_duration_seconds_count{graylb_service=~"user-service|orders\\.http"}[60s]))
}

func Example_diffDocs() {
	fmt.Print(diffDocs([]byte(`{"canaryPercent": 5, "grayUsers": ["u1"]}`), []byte(`{"canaryPercent": 25, "grayUsers": ["u1"]}`)))
	// Output:
	//   {
	// -   "canaryPercent": 5,
	// +   "canaryPercent": 25,
	//     "grayUsers": [
	//       "u1"
	//     ]
	//   }
}

func TestPromString(t *testing.T) {
	for in, want := range map[string]string{
		`svc`:       `"svc"`,
		`a"b`:       `"a\"b"`,
		`a\b`:       `"a\\b"`,
		"a\nb":      `"a\x0ab"`,
		`"}) or up`: `"\"}) or up"`,
	} {
		if got := promString(in); got != want {
			t.Errorf("promString(%q) = %s, want %s", in, got, want)
		}
	}
	if got := promDuration(1500 * time.Millisecond); got != "1500ms" {
		t.Errorf("promDuration = %s", got)
	}
}

// fakeProm answers instant queries with fn's answer body; those of the
// callers' picks and ejections with no series, as a Prometheus of callers
// without otelgraylb's Observer and Register does.
func fakeProm(t testing.TB, fn func(query string) string) *httptest.Server {
	return fakePromAll(t, func(q string) string {
		if isFallBackQuery(q) {
			return vector()
		}
		return fn(q)
	})
}

// isFallBackQuery: q is one of the queries of the callers' picks and
// ejections (fallBackQueriesFor).
func isFallBackQuery(q string) bool {
	return strings.Contains(q, defaultPicksMetric) || strings.Contains(q, ejectedMetric)
}

// fakePromAll answers every instant query with fn's answer body.
func fakePromAll(t testing.TB, fn func(query string) string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(fn(r.URL.Query().Get("query"))))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// vector is Prometheus' answer to a query by kind of svc's calls: kinds
// and values in pairs.
func vector(pairs ...any) string { return vectorOf("svc", pairs...) }

func vectorOf(service string, pairs ...any) string {
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, fmt.Sprintf(`{"metric":{"graylb_service":%q,"graylb_kind":%q},"value":[1700000000.1,%q]}`, service, pairs[i], pairs[i+1]))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(parts, ",") + `]}}`
}

// bucketVectorOf is Prometheus' answer to the buckets query of service.
func bucketVectorOf(service string, gray, prod []bucket) string {
	var parts []string
	for kind, bs := range map[string][]bucket{"gray": gray, "prod": prod} {
		for _, b := range bs {
			parts = append(parts, fmt.Sprintf(`{"metric":{"graylb_service":%q,"graylb_kind":%q,"le":%q},"value":[1700000000.1,"%g"]}`,
				service, kind, strconv.FormatFloat(b.Le, 'g', -1, 64), b.Count))
		}
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(parts, ",") + `]}}`
}

// joinVectors merges answers of vectorOf and bucketVectorOf.
func joinVectors(answers ...string) string {
	var parts []string
	for _, a := range answers {
		a = strings.TrimPrefix(a, `{"status":"success","data":{"resultType":"vector","result":[`)
		if a = strings.TrimSuffix(a, `]}}`); a != "" {
			parts = append(parts, a)
		}
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(parts, ",") + `]}}`
}

func TestPromHostileAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // in the error; "" = no error
	}{
		{"empty vector", vector(), ""},
		{"NaN", vector("gray", "NaN", "prod", "+Inf"), "bucket bound"},
		{"garbage", "<html>oops", "no query result"},
		{"empty", "", "no query result"},
		{"error status", `{"status":"error","errorType":"bad_data","error":"parse error"}`, "bad_data"},
		{"matrix", `{"status":"success","data":{"resultType":"matrix","result":[]}}`, "not a vector"},
		{"short sample", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`, "not [time, value]"},
		{"number value", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1, 5]}]}}`, "not a string"},
		{"word value", vector("gray", "many"), `sample value "many"`},
		{"duplicate series", vector("gray", "1", "gray", "2"), "two series"},
		{"huge", `{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(`{"metric":{},"value":[1,"1"]},`, 1<<20) + `]}}`, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeProm(t, func(string) string { return tc.body })
			p := &prometheus{base: srv.URL, client: &http.Client{Timeout: 10 * time.Second}}
			got, err := p.compare(context.Background(), queriesFor(defaultMetric, []string{"svc"}, time.Minute), time.Time{})
			gray, prod := got["svc"].gray, got["svc"].prod
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if v, _ := judge(gray, prod, thresholds{MinRequests: 1}); v != verdictWait {
					t.Fatalf("judged %v on %s", v, tc.name)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// promTraffic serves a fake Prometheus whose gray and prod callers made
// calls with the given error ratios.
func promTraffic(t testing.TB, grayCalls, grayErrRatio, prodCalls, prodErrRatio float64) *httptest.Server {
	return promTrafficOf(t, traffic{"svc", grayCalls, grayErrRatio, prodCalls, prodErrRatio})
}

// traffic is what one service's callers made of it.
type traffic struct {
	service                 string
	grayCalls, grayErrRatio float64
	prodCalls, prodErrRatio float64
}

// promTrafficOf serves a fake Prometheus whose callers made calls of
// several services (whatever services a query names).
func promTrafficOf(t testing.TB, ts ...traffic) *httptest.Server {
	return fakeProm(t, func(q string) string { return trafficAnswer(q, ts...) })
}

// trafficAnswer is the answer to q of a Prometheus whose callers made ts.
func trafficAnswer(q string, ts ...traffic) string {
	var answers []string
	for _, tr := range ts {
		switch {
		case strings.Contains(q, "_bucket"):
			answers = append(answers, bucketVectorOf(tr.service, histOf(int(tr.grayCalls), func(int) float64 { return 0.02 }),
				histOf(int(tr.prodCalls), func(int) float64 { return 0.02 })))
		case strings.Contains(q, `outcome="error"`):
			answers = append(answers, vectorOf(tr.service, "gray", fmt.Sprint(tr.grayCalls*tr.grayErrRatio), "prod", fmt.Sprint(tr.prodCalls*tr.prodErrRatio)))
		default:
			answers = append(answers, vectorOf(tr.service, "gray", fmt.Sprint(tr.grayCalls), "prod", fmt.Sprint(tr.prodCalls)))
		}
	}
	return joinVectors(answers...)
}

func storedRules(t testing.TB, f *fakeNacos) graylb.Rules {
	t.Helper()
	r, err := graylb.ParseRules([]byte(f.get("DEFAULT_GROUP", "graylb-rules.json")))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rolloutArgs are a rollout of svc (a prod and a gray instance registered
// in f, unless the test registered others) with short steps.
func rolloutArgs(f *fakeNacos, prom string, more ...string) []string {
	f.mu.Lock()
	_, ok := f.hostsOf["svc"]
	f.mu.Unlock()
	if !ok {
		f.register("svc", prodAndGray)
	}
	return rolloutArgsOf(f, "svc", prom, more...)
}

// rolloutArgsOf are a rollout of service with short steps.
func rolloutArgsOf(f *fakeNacos, service, prom string, more ...string) []string {
	return append([]string{"rollout", "--service", service, "--nacos", f.addr(), "--prometheus", prom,
		"--steps", "1,5,100", "--interval", "100ms", "--poll", "20ms", "--window", "5s", "--min-requests", "50", "--max-wait", "300ms"}, more...)
}

func TestRolloutRollsBack(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"grayUsers": ["qa"]}`)
	prom := promTraffic(t, 500, 0.20, 5000, 0.001)
	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL)...)
	if code != exitRollback {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	r := storedRules(t, f)
	if !r.Closed || r.CanaryPercent != 1 || len(r.GrayUsers) != 1 {
		t.Fatalf("stored %+v, want closed at canary 1 with the gray users kept", r)
	}
	if !strings.Contains(out, "rolled back at canary 1%") || !strings.Contains(out, "20.00%") {
		t.Fatalf("no evidence in the output:\n%s", out)
	}
}

func TestRolloutHealthy(t *testing.T) {
	f := newFakeNacos(t)
	prom := promTraffic(t, 500, 0.002, 5000, 0.001)
	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL, "-o", "json")...)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if r := storedRules(t, f); r.Closed || r.CanaryPercent != 100 {
		t.Fatalf("stored %+v, want canary 100", r)
	}
	for _, want := range []string{`"outcome": "healthy"`, `"canaryPercent": 100`, "promote"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRolloutNeverAdvancesBlind(t *testing.T) {
	// Prometheus answers the checks before the first step (the callers
	// have series), then as judge(q) says.
	started := func(t testing.TB, judge func(q string) string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query().Get("query")
			switch {
			case r.URL.Path != "/api/v1/query":
				http.NotFound(w, r)
			case isFallBackQuery(q):
				w.Write([]byte(vector()))
			case strings.HasPrefix(q, "count by (graylb_service) ("):
				w.Write([]byte(vector("prod", "4")))
			case strings.HasPrefix(q, "group by ("):
				w.Write([]byte(vector("prod", "1")))
			default:
				body := judge(q)
				if body == "" { // the connection dropped
					c, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						c.Close()
					}
					return
				}
				w.Write([]byte(body))
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, tc := range []struct {
		name string
		prom func(t testing.TB) string
		says string
	}{
		{"too little traffic", func(t testing.TB) string { return promTraffic(t, 10, 0, 5000, 0).URL }, "at least 50 needed"},
		{"no gray calls yet", func(t testing.TB) string {
			return started(t, func(q string) string {
				switch {
				case strings.HasPrefix(q, "count by (graylb_service, graylb_kind) ("):
					return vector("prod", "4")
				case strings.Contains(q, "_bucket"):
					return vector()
				}
				return vector("prod", "5000")
			})
		}, "gray completed 0 calls in the step, at least 50 needed to judge; Prometheus has 4 series of graylb_client_call_duration_seconds_count for svc, none of gray calls: no call has reached a gray instance of svc"},
		{"the series are gone", func(t testing.TB) string {
			return started(t, func(q string) string { return vector() })
		}, "gray completed 0 calls in the step, at least 50 needed to judge; no series of graylb_client_call_duration_seconds_count for service svc in Prometheus: are its callers scraped?"},
		{"garbage", func(t testing.TB) string { return started(t, func(string) string { return "garbage" }) }, "prometheus unreachable"},
		{"unreachable", func(t testing.TB) string { return started(t, func(string) string { return "" }) }, "prometheus unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			code, out, errOut := runCLI(t, nil, rolloutArgs(f, tc.prom(t))...)
			if code != exitNoData {
				t.Fatalf("exit %d:\n%s%s", code, out, errOut)
			}
			if r := storedRules(t, f); r.Closed || r.CanaryPercent != 1 {
				t.Fatalf("stored %+v, want canary 1 (the first step) left as it is", r)
			}
			if !strings.Contains(errOut, "waiting, not advancing blind") || !strings.Contains(errOut, tc.says) || !strings.Contains(out, "stay at canary 1%") {
				t.Fatalf("it did not say why it waits (%q):\n%s%s", tc.says, out, errOut)
			}
		})
	}
}

// A rollout that cannot judge writes nothing (not even its lease) and says
// why: Prometheus unreachable, or no series of the released service's
// calls (its callers are not scraped, or --metric names another histogram).
func TestRolloutRefusesWhatItCannotJudge(t *testing.T) {
	for _, tc := range []struct {
		name string
		prom func(t testing.TB) string
		code int
		says []string
	}{
		{"no series", func(t testing.TB) string { return fakeProm(t, func(string) string { return vector() }).URL }, exitFailed,
			[]string{"no series of graylb_client_call_duration_seconds_count for service svc in Prometheus at http://127.0.0.1:", "are its callers scraped"}},
		{"unreachable", func(t testing.TB) string {
			srv := httptest.NewServer(http.NotFoundHandler())
			srv.Close()
			return srv.URL
		}, exitFailed, []string{"reading Prometheus", "prometheus unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			code, out, errOut := runCLI(t, nil, rolloutArgs(f, tc.prom(t))...)
			if code != tc.code || f.publishes != 0 || f.get("DEFAULT_GROUP", leaseDataID) != "" {
				t.Fatalf("exit %d (want %d), %d writes, lease %q:\n%s%s", code, tc.code, f.publishes, f.get("DEFAULT_GROUP", leaseDataID), out, errOut)
			}
			for _, w := range append(tc.says, "rollout not started") {
				if !strings.Contains(out, w) {
					t.Fatalf("the output lacks %q:\n%s%s", w, out, errOut)
				}
			}
		})
	}
}

// Steps that cannot hold two scrapes of a caller can never be judged: a
// rollout with --interval 15s over callers scraped every 20 s waited out
// --max-wait and said gray completed 0 calls while ~600 gray calls had
// been made and scraped. It refuses such settings before writing
// anything, saying what to set: the scrape interval is that of the
// callers' targets in Prometheus' /api/v1/targets.
func TestRolloutRefusesStepsShorterThanTwoScrapes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		switch {
		case r.URL.Path == "/api/v1/targets":
			w.Write([]byte(`{"status":"success","data":{"activeTargets":[
			 {"labels":{"job":"callers","instance":"10.0.0.1:9090"},"scrapeInterval":"20s","health":"up"},
			 {"labels":{"job":"callers","instance":"10.0.0.2:9090"},"scrapeInterval":"10s","health":"up"},
			 {"labels":{"job":"other","instance":"10.0.0.3:9090"},"scrapeInterval":"1m","health":"up"}]}}`))
		case r.URL.Path != "/api/v1/query":
			http.NotFound(w, r)
		case strings.HasPrefix(q, "group by (job, instance)"):
			w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[
			 {"metric":{"job":"callers","instance":"10.0.0.1:9090"},"value":[1700000000.1,"1"]},
			 {"metric":{"job":"callers","instance":"10.0.0.2:9090"},"value":[1700000000.1,"1"]}]}}`))
		case strings.Contains(q, "_bucket"):
			w.Write([]byte(bucketVectorOf("svc", histOf(500, func(int) float64 { return 0.02 }), histOf(5000, func(int) float64 { return 0.02 }))))
		default:
			w.Write([]byte(vector("gray", "500", "prod", "5000")))
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name string
		more []string
		says string
	}{
		{"interval", []string{"--interval", "15s", "--window", "0s"}, "--interval 15s"},
		{"window", []string{"--interval", "1m", "--window", "30s"}, "--window 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			code, out, errOut := runCLI(t, nil, rolloutArgs(f, srv.URL, append(tc.more, "--steps", "1")...)...)
			if code != exitUsage || f.publishes != 0 || f.get("DEFAULT_GROUP", leaseDataID) != "" {
				t.Fatalf("exit %d, %d writes, lease %q:\n%s%s", code, f.publishes, f.get("DEFAULT_GROUP", leaseDataID), out, errOut)
			}
			for _, w := range []string{"rollout not started", tc.says, `the callers of svc are scraped every 20s (job="callers", instance="10.0.0.1:9090")`,
				"fewer than two scrapes", "at least 40s"} {
				if !strings.Contains(out, w) {
					t.Fatalf("the output lacks %q:\n%s%s", w, out, errOut)
				}
			}
		})
	}
	// Two scrapes fit: it starts.
	f := newFakeNacos(t)
	r := startRollout(t, time.Minute, rolloutArgs(f, srv.URL, "--interval", "40s", "--window", "0s")...)
	r.untilStep(t, "1/3: canary 1%")
}

func TestRolloutInterrupted(t *testing.T) {
	f := newFakeNacos(t)
	var queries atomic.Int64
	prom := fakeProm(t, func(q string) string {
		if strings.HasPrefix(q, "sum by") { // a step's check
			queries.Add(1)
		}
		return vector("gray", "1000", "prod", "1000")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, rolloutArgs(f, prom.URL, "--interval", "1h"), env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
			getenv: func(string) string { return "" }, http: &http.Client{}})
	}()
	eventually(t, 20*time.Second, "the rollout queries Prometheus 3 times", func() bool { return queries.Load() >= 3 })
	cancel()
	select {
	case code := <-done:
		if code != exitSignal {
			t.Fatalf("exit %d:\n%s%s", code, out.String(), errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the rollout did not stop within 20s of its interruption")
	}
	if r := storedRules(t, f); r.Closed || r.CanaryPercent != 1 {
		t.Fatalf("stored %+v, want canary 1 as it was", r)
	}
	if !strings.Contains(out.String(), "interrupted: the rules stay where they were, canary 1%") {
		t.Fatalf("it did not say where the rules are:\n%s", out.String())
	}
}

func TestRolloutRefusesClosedRules(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"closed": true}`)
	prom := promTraffic(t, 500, 0, 500, 0)
	code, out, _ := runCLI(t, nil, rolloutArgs(f, prom.URL)...)
	if code != exitFailed || !strings.Contains(out, "graylb resume first") || f.publishes != 0 {
		t.Fatalf("exit %d, %d writes:\n%s", code, f.publishes, out)
	}
}

func TestRolloutStopsWhenClosedByOthers(t *testing.T) {
	f := newFakeNacos(t)
	var queries atomic.Int64
	prom := fakeProm(t, func(q string) string {
		if queries.Add(1) == 6 { // someone runs graylb rollback by hand
			f.set("DEFAULT_GROUP", "graylb-rules.json", `{"closed": true, "canaryPercent": 1}`)
		}
		return vector("gray", "1000", "prod", "1000")
	})
	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL, "--interval", "1h")...)
	if code != exitFailed || !strings.Contains(out, "someone closed the rules during step 1") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if r := storedRules(t, f); !r.Closed {
		t.Fatalf("stored %+v: the rollout reopened closed rules", r)
	}
}

// A failed-call count that is not a finite, non-negative number (a hostile
// or broken Prometheus) says nothing of gray's errors: the judge waits
// rather than take it as no error and advance blind.
func TestJudgeWaitsOnErrorsNotANumber(t *testing.T) {
	th := thresholds{MinRequests: 100, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond}
	prod := sample{2000, 2, nil}
	for _, errs := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -40} {
		if v, why := judge(sample{200, errs, nil}, prod, th); v != verdictWait {
			t.Errorf("gray errors %v: judge = %v %q, want wait", errs, v, why)
		}
	}
}

// Rules closed by someone else while the rollout writes the next step
// (graylb rollback by hand, between the step's read and its write) stay as
// they were closed: the compare-and-set fails and the retry, which reads
// the closed rules, does not write the step's canary into them, so graylb
// resume does not reopen them at a canary nobody judged.
func TestRolloutDoesNotRaiseClosedRules(t *testing.T) {
	f := newFakeNacos(t)
	var publishes atomic.Int64
	f.beforePublish = func() {
		if publishes.Add(1) == 2 { // the write of step 2 (canary 5)
			f.set("DEFAULT_GROUP", "graylb-rules.json", `{"closed": true, "canaryPercent": 1}`)
		}
	}
	prom := promTraffic(t, 500, 0.002, 5000, 0.001)
	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL)...)
	if code != exitFailed || !strings.Contains(out, "someone closed the rules") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if r := storedRules(t, f); !r.Closed || r.CanaryPercent != 1 {
		t.Fatalf("stored %+v, want closed at canary 1 as they were closed", r)
	}
}

// Gray routing switched off by someone during the rollout (enabled: false:
// every instance serves every request, so the callers' gray and prod calls
// no longer tell the builds apart) stops it: no later step is written and
// no verdict is given on metrics that cannot hold one.
func TestRolloutStopsWhenRoutingSwitchedOff(t *testing.T) {
	f := newFakeNacos(t)
	var publishes atomic.Int64
	f.beforePublish = func() {
		if publishes.Add(1) == 2 { // while step 2 (canary 5) is written
			f.set("DEFAULT_GROUP", "graylb-rules.json", `{"enabled": false, "canaryPercent": 1}`)
		}
	}
	prom := promTraffic(t, 500, 0.002, 5000, 0.001)
	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL)...)
	if code != exitFailed || !strings.Contains(out, "gray routing") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if r := storedRules(t, f); r.Enabled == nil || *r.Enabled || r.CanaryPercent != 1 {
		t.Fatalf("stored %+v, want routing off at canary 1 as it was left", r)
	}
}

// Gray routing switched off during a step (read at a poll) stops the
// rollout as closing the rules does.
func TestRolloutStopsWhenRoutingSwitchedOffDuringAStep(t *testing.T) {
	f := newFakeNacos(t)
	var queries atomic.Int64
	prom := fakeProm(t, func(q string) string {
		if queries.Add(1) == 6 {
			f.set("DEFAULT_GROUP", "graylb-rules.json", `{"enabled": false, "canaryPercent": 1}`)
		}
		return vector("gray", "1000", "prod", "1000")
	})
	code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL, "--interval", "1h")...)
	if code != exitFailed || !strings.Contains(out, "switched gray routing off (enabled: false) during step 1") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if r := storedRules(t, f); r.Enabled == nil || *r.Enabled || r.CanaryPercent != 1 {
		t.Fatalf("stored %+v, want routing off at canary 1 as it was left", r)
	}
}

// A rollout of a service with no instance registered (a typo) or none gray
// writes nothing, not even its lease, and says why: a canary written for a
// service that is not there sends its share of every chain's requests to
// whatever gray instances are registered, and judges nothing.
func TestRolloutRefusesAServiceNotRegistered(t *testing.T) {
	for _, tc := range []struct {
		name, hosts string
		want        []string
	}{
		{"no instance", "", []string{"ledgr: no instance registered in group DEFAULT_GROUP of Nacos at 127.0.0.1:", "is the name right?"}},
		{"no gray instance", `{"hosts":[{"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{}},
		  {"ip":"127.0.0.1","port":9002,"weight":1,"healthy":false,"enabled":true,"metadata":{"gray":"true"}}]}`,
			[]string{"ledgr: no gray instance takes requests (2 registered", "register the gray build first"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			f.register("ledger", prodAndGray)
			if tc.hosts != "" {
				f.register("ledgr", tc.hosts)
			}
			prom := promTraffic(t, 500, 0, 5000, 0)
			code, out, errOut := runCLI(t, nil, rolloutArgsOf(f, "ledgr", prom.URL)...)
			if code != exitFailed || f.publishes != 0 || f.get("DEFAULT_GROUP", leaseDataID) != "" {
				t.Fatalf("exit %d, %d writes, lease %q:\n%s%s", code, f.publishes, f.get("DEFAULT_GROUP", leaseDataID), out, errOut)
			}
			for _, w := range append(tc.want, "rollout not started") {
				if !strings.Contains(out, w) {
					t.Fatalf("the output lacks %q:\n%s%s", w, out, errOut)
				}
			}
		})
	}
}

// The canary draws requests, so every service with gray instances takes
// the step's share: a rollout judges each one registered at the step, not
// only --service, and rolls back when any is worse than its prod. A
// service without gray instances is not judged, nor one that nobody's
// calls are scraped for (its gray instances consume records), which it
// says.
func TestRolloutJudgesEveryServiceWithGrayInstances(t *testing.T) {
	f := newFakeNacos(t)
	f.register("ledger", prodAndGray)
	f.register("billing", `{"hosts":[{"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{}}]}`)
	f.register("audit", prodAndGray)
	// The gray build of orders registers once step 1 is written: step 2
	// judges it.
	var publishes atomic.Int64
	f.afterPublish = func() {
		if publishes.Add(1) == 1 {
			f.register("orders", prodAndGray)
		}
	}
	prom := promTrafficOf(t, traffic{"ledger", 500, 0.002, 5000, 0.001}, traffic{"orders", 500, 0.2, 5000, 0.001},
		traffic{"billing", 0, 0, 5000, 0.001})
	code, out, errOut := runCLI(t, nil, rolloutArgsOf(f, "ledger", prom.URL)...)
	if code != exitRollback || !strings.Contains(out, "rolled back at canary 5%") || !strings.Contains(out, "orders: gray error ratio 20.00%") {
		t.Fatalf("exit %d, want 3 at canary 5%% for orders:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"step 1/3: canary 1% set; judging ledger\n", "step 2/3: canary 5% set; judging ledger, orders\n",
		"audit: not judged: it has gray instances but Prometheus has no series of graylb_client_call_duration_seconds_count for it"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the log lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "billing") {
		t.Errorf("billing, which has no gray instance, is named:\n%s", errOut)
	}
	if r := storedRules(t, f); !r.Closed || r.CanaryPercent != 5 {
		t.Fatalf("stored %+v, want closed at canary 5", r)
	}
}

func TestParsePromDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"15s": 15 * time.Second, "1m30s": 90 * time.Second, "500ms": 500 * time.Millisecond,
		"1d": 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1h0m0s": time.Hour, "": 0, "1x": 0, "0s": 0, "s": 0, "99999999999999y": 0} {
		got, ok := parsePromDuration(in)
		if got != want || ok != (want > 0) {
			t.Errorf("parsePromDuration(%q) = %v, %t; want %v", in, got, ok, want)
		}
	}
}
