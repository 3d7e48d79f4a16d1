package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Default metric and label names: those otelgraylb's call-duration
// histogram (graylb.client.call.duration, seconds; attributes
// graylb.service, graylb.kind, graylb.call.outcome) gets from the
// OpenTelemetry Prometheus exporter.
const (
	defaultMetric  = "graylb_client_call_duration_seconds"
	labelService   = "graylb_service"
	labelKind      = "graylb_kind"
	labelOutcome   = "graylb_call_outcome"
	outcomeError   = "error"
	maxPromAnswer  = 16 << 20
	maxPromVectors = 1000
)

// prometheus reads instant queries from Prometheus' HTTP API.
type prometheus struct {
	base   string // http://host:port[/prefix]
	client *http.Client
}

// errPromUnreachable: Prometheus did not answer (or not with data).
var errPromUnreachable = errors.New("prometheus unreachable")

// query runs an instant query and returns the vector's values by the
// label byLabel. Garbage, an error status, a non-vector answer or more
// series than can be meant fail; NaN values are kept (the judge treats
// them as no data).
func (p *prometheus) query(ctx context.Context, q, byLabel string) (map[string]float64, error) {
	u := p.base + "/api/v1/query?" + url.Values{"query": {q}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPromUnreachable, cause(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPromAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer: %v", errPromUnreachable, err)
	}
	if len(body) > maxPromAnswer {
		return nil, fmt.Errorf("%w: answer larger than %d bytes", errPromUnreachable, maxPromAnswer)
	}
	var ans struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []json.RawMessage `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("%w: answered %d with no query result (%s)", errPromUnreachable, resp.StatusCode, firstLine(string(body), 100))
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("%w: query %s: %s %s", errPromUnreachable, q, ans.ErrorType, firstLine(ans.Error, 200))
	}
	if ans.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%w: query %s: a %q result, not a vector", errPromUnreachable, q, ans.Data.ResultType)
	}
	if len(ans.Data.Result) > maxPromVectors {
		return nil, fmt.Errorf("%w: query %s: %d series", errPromUnreachable, q, len(ans.Data.Result))
	}
	out := map[string]float64{}
	for _, r := range ans.Data.Result {
		if len(r.Value) != 2 {
			return nil, fmt.Errorf("%w: query %s: a sample is not [time, value]", errPromUnreachable, q)
		}
		var s string
		if err := json.Unmarshal(r.Value[1], &s); err != nil {
			return nil, fmt.Errorf("%w: query %s: a sample value is not a string", errPromUnreachable, q)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: query %s: sample value %q", errPromUnreachable, q, firstLine(s, 40))
		}
		k := r.Metric[byLabel]
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: query %s: two series for %s=%q", errPromUnreachable, q, byLabel, k)
		}
		out[k] = v
	}
	return out, nil
}

// promQueries are the three queries of a comparison.
type promQueries struct {
	requests, errors, p99 string
}

// queriesFor builds the queries for service over window: calls and failed
// calls by kind (increase of the histogram's count), and the p99 by kind.
func queriesFor(metric, service string, window time.Duration) promQueries {
	sel := labelService + "=" + promString(service)
	w := "[" + promDuration(window) + "]"
	return promQueries{
		requests: "sum by (" + labelKind + ") (increase(" + metric + "_count{" + sel + "}" + w + "))",
		errors:   "sum by (" + labelKind + ") (increase(" + metric + "_count{" + sel + "," + labelOutcome + "=" + promString(outcomeError) + "}" + w + "))",
		p99:      "histogram_quantile(0.99, sum by (" + labelKind + ", le) (rate(" + metric + "_bucket{" + sel + "}" + w + ")))",
	}
}

// promString quotes s as a PromQL string literal.
func promString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// promDuration writes d in PromQL's duration syntax (whole milliseconds).
func promDuration(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if ms%1000 == 0 {
		return strconv.FormatInt(ms/1000, 10) + "s"
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

// compare reads both kinds' samples for service.
func (p *prometheus) compare(ctx context.Context, q promQueries) (gray, prod sample, err error) {
	req, err := p.query(ctx, q.requests, labelKind)
	if err != nil {
		return gray, prod, err
	}
	errs, err := p.query(ctx, q.errors, labelKind)
	if err != nil {
		return gray, prod, err
	}
	p99, err := p.query(ctx, q.p99, labelKind)
	if err != nil {
		return gray, prod, err
	}
	get := func(m map[string]float64, k string, missing float64) float64 {
		if v, ok := m[k]; ok {
			return v
		}
		return missing
	}
	gray = sample{Requests: get(req, "gray", 0), Errors: get(errs, "gray", 0), P99: get(p99, "gray", math.NaN())}
	prod = sample{Requests: get(req, "prod", 0), Errors: get(errs, "prod", 0), P99: get(p99, "prod", math.NaN())}
	return gray, prod, nil
}
