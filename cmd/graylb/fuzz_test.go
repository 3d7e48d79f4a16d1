package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"testing"
	"time"
)

// answerWith is a RoundTripper that answers every request with status and
// body: what a Prometheus, or whatever listens in its place, may answer.
type answerWith struct {
	status int
	body   []byte
}

func (a answerWith) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(a.body))}, nil
}

// FuzzPrometheusAnswer: whatever the server answers, a query either fails
// with errPromUnreachable (the rollout then waits and says so) or returns
// the vector's values; the judge over those values never panics, and it
// waits, never judges, while gray's call count is not a number of at least
// the minimum (NaN, infinite, negative, missing).
func FuzzPrometheusAnswer(f *testing.F) {
	f.Add(200, []byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"graylb_kind":"gray"},"value":[1,"120"]},{"metric":{"graylb_kind":"prod"},"value":[1,"900"]}]}}`))
	f.Add(200, []byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"graylb_kind":"gray"},"value":[1,"NaN"]}]}}`))
	f.Add(200, []byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"graylb_kind":"gray"},"value":[1,"+Inf"]},{"metric":{"graylb_kind":"gray"},"value":[1,"1"]}]}}`))
	f.Add(200, []byte(`{"status":"success","data":{"resultType":"matrix","result":[]}}`))
	f.Add(400, []byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
	f.Add(502, []byte("<html>bad gateway</html>"))
	f.Add(200, []byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`))
	f.Add(200, []byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"graylb_kind":"gray"},"value":[1,-3]}]}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		p := &prometheus{base: "http://prometheus.invalid", client: &http.Client{Transport: answerWith{status, body}}}
		got, err := p.query(context.Background(), "q", labelKind, time.Time{})
		if err != nil {
			if !errors.Is(err, errPromUnreachable) {
				t.Fatalf("an answer failed with %v, not errPromUnreachable", err)
			}
			if got != nil {
				t.Fatalf("a failed query returned %v", got)
			}
			return
		}
		th := thresholds{MinRequests: 10, MaxErrorIncrease: 0.01, MaxLatencyRatio: 1.5, LatencySlack: 10 * time.Millisecond}
		gray := sample{Requests: got["gray"], Errors: got[""], Buckets: []bucket{{Le: got["gray"], Count: got["x"]}, {Le: math.Inf(1), Count: got[""]}}}
		prod := sample{Requests: got["prod"], Errors: got["x"], Buckets: []bucket{{Le: got["prod"], Count: got["gray"]}, {Le: got["x"], Count: got["prod"]}}}
		v, why := judge(gray, prod, th)
		if why == "" {
			t.Fatalf("verdict %v without a reason", v)
		}
		if n := got["gray"]; !(n >= th.MinRequests) || math.IsInf(n, 0) {
			if v != verdictWait {
				t.Fatalf("gray with %v calls judged %v (%s)", n, v, why)
			}
		}
	})
}
