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
	"regexp"
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
	labelJob       = "job"      // a scrape target's labels, as Prometheus sets them
	labelInstance  = "instance" //
	maxPromAnswer  = 16 << 20
	maxPromVectors = 20000
)

// The callers' picks, as otelgraylb's Observer counts them
// (graylb.picks: service, the request's kind, the pick's outcome) and its
// Register gauges the instances ejected now (graylb.instances.ejected:
// service, the instances' kind), under the names the OpenTelemetry
// Prometheus exporter gives them.
const (
	defaultPicksMetric = "graylb_picks_total"
	ejectedMetric      = "graylb_instances_ejected"
	labelPickOutcome   = "graylb_outcome"
	outcomeFellBack    = "fell_back"
)

// prometheus reads instant queries from Prometheus' HTTP API.
type prometheus struct {
	base   string // http://host:port[/prefix]
	client *http.Client
}

// errPromUnreachable: Prometheus did not answer (or not with data).
var errPromUnreachable = errors.New("prometheus unreachable")

// series is one element of an instant vector.
type series struct {
	labels map[string]string
	value  float64
}

// query runs an instant query at time at (zero: Prometheus' now) and
// returns the vector's values by the label byLabel. Garbage, an error
// status, a non-vector answer, more series than can be meant or two series
// with one value of byLabel fail; NaN values are kept (the judge treats
// them as no data).
func (p *prometheus) query(ctx context.Context, q, byLabel string, at time.Time) (map[string]float64, error) {
	vec, err := p.vector(ctx, q, at)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, r := range vec {
		k := r.labels[byLabel]
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: query %s: two series for %s=%q", errPromUnreachable, q, byLabel, k)
		}
		out[k] = r.value
	}
	return out, nil
}

// vector runs an instant query and returns its vector (see query).
func (p *prometheus) vector(ctx context.Context, q string, at time.Time) ([]series, error) {
	params := url.Values{"query": {q}}
	if !at.IsZero() {
		params.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	u := p.base + "/api/v1/query?" + params.Encode()
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
	out := make([]series, 0, len(ans.Data.Result))
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
		out = append(out, series{labels: r.Metric, value: v})
	}
	return out, nil
}

// promQueries are the three queries of a comparison.
type promQueries struct {
	requests, errors, buckets string
}

// queriesFor builds the queries for services over window, the time since
// the step's write: calls and failed calls by service and kind (what the
// histogram's count grew by), and the histogram's buckets by service and
// kind (what each bucket's count grew by); see grown.
func queriesFor(metric string, services []string, window time.Duration) promQueries {
	sel := serviceSelector(services)
	scraped := "group by (" + labelJob + ", " + labelInstance + ") (" + metric + "_count offset " + promDuration(window) + ")"
	by := labelService + ", " + labelKind
	return promQueries{
		requests: "sum by (" + by + ") (" + grown(metric+"_count{"+sel+"}", scraped, window) + ")",
		errors:   "sum by (" + by + ") (" + grown(metric+"_count{"+sel+","+labelOutcome+"="+promString(outcomeError)+"}", scraped, window) + ")",
		buckets:  "sum by (" + by + ", le) (" + grown(metric+"_bucket{"+sel+"}", scraped, window) + ")",
	}
}

// serviceSelector is the label matcher of the series of services (one at
// least).
func serviceSelector(services []string) string {
	if len(services) == 1 {
		return labelService + "=" + promString(services[0])
	}
	quoted := make([]string, len(services))
	for i, s := range services {
		quoted[i] = regexp.QuoteMeta(s)
	}
	return labelService + "=~" + promString(strings.Join(quoted, "|"))
}

// grown is what each counter series of selector grew by in the step, the
// window up to now:
//   - a series that had a sample when the window began: its increase;
//   - one that had none, of a target (job, instance) that had samples of
//     the histogram then (scraped): its whole value, since it was born in
//     the step (a kind's first failed call makes its error series;
//     increase would miss what it counted before its first sample);
//   - one that had none, of a target that had none either (first
//     scraped in the step: found late, or back from failed scrapes): what
//     it grew by after its first sample, its increase; its value then is
//     calls made before, maybe long before, the step.
//
// scraped is the targets scraped when the window began.
func grown(selector, scraped string, window time.Duration) string {
	d := promDuration(window)
	return "((" + selector + " unless " + selector + " offset " + d + ") and on (" + labelJob + ", " + labelInstance + ") " + scraped +
		") or increase(" + selector + "[" + d + "])"
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

// fallBackQueries are the queries of what the callers' picks say of the
// gray requests of services in the step.
type fallBackQueries struct {
	fellBack, ejected string
}

// fallBackQueriesFor builds, for services over window (the time since the
// step's write): the gray picks that fell back to prod, by service, counted
// as the calls are (see grown; a target counts as scraped when the window
// began when it had samples of the picks or of the call histogram metric
// then); and the most gray instances one caller had ejected (or paused) at
// once in the window, by service.
func fallBackQueriesFor(picks, metric string, services []string, window time.Duration) fallBackQueries {
	sel := serviceSelector(services)
	d := promDuration(window)
	scraped := "group by (" + labelJob + ", " + labelInstance + ") (" + picks + " offset " + d + " or " + metric + "_count offset " + d + ")"
	fell := picks + "{" + sel + "," + labelKind + "=" + promString("gray") + "," + labelPickOutcome + "=" + promString(outcomeFellBack) + "}"
	return fallBackQueries{
		fellBack: "sum by (" + labelService + ") (" + grown(fell, scraped, window) + ")",
		ejected:  "max by (" + labelService + ") (max_over_time(" + ejectedMetric + "{" + sel + "," + labelKind + "=" + promString("gray") + "}[" + d + "]))",
	}
}

// fallBack is what the callers' picks said of one service's gray
// requests in the step.
type fallBack struct {
	fellBack float64 // gray picks that fell back to prod
	ejected  float64 // the most gray instances one caller had ejected or paused at once
}

// fallBacks reads the fall-backs of each service as they were at time at
// (zero: Prometheus' now). A service without series is absent; a value
// that is not a finite, non-negative number counts as none.
func (p *prometheus) fallBacks(ctx context.Context, q fallBackQueries, at time.Time) (map[string]fallBack, error) {
	fell, err := p.query(ctx, q.fellBack, labelService, at)
	if err != nil {
		return nil, err
	}
	ejected, err := p.query(ctx, q.ejected, labelService, at)
	if err != nil {
		return nil, err
	}
	out := map[string]fallBack{}
	for svc, v := range fell {
		fb := out[svc]
		fb.fellBack = count(v)
		out[svc] = fb
	}
	for svc, v := range ejected {
		fb := out[svc]
		fb.ejected = count(v)
		out[svc] = fb
	}
	return out, nil
}

// count is v when it is a finite, non-negative number, else 0.
func count(v float64) float64 {
	if !(v >= 0) || math.IsInf(v, 1) {
		return 0
	}
	return v
}

// maxBuckets bounds a histogram's buckets per kind.
const maxBuckets = 200

// kindSamples are what one service's callers saw of each kind.
type kindSamples struct {
	gray, prod sample
}

// compare reads the samples of each service and kind as they were at
// time at (zero: Prometheus' now). A service without series is absent.
func (p *prometheus) compare(ctx context.Context, q promQueries, at time.Time) (map[string]kindSamples, error) {
	out := map[string]kindSamples{}
	get := func(svc string) kindSamples { return out[svc] }
	for _, c := range []struct {
		query string
		set   func(s *sample, v float64)
	}{
		{q.requests, func(s *sample, v float64) { s.Requests = v }},
		{q.errors, func(s *sample, v float64) { s.Errors = v }},
	} {
		vec, err := p.vector(ctx, c.query, at)
		if err != nil {
			return nil, err
		}
		seen := map[[2]string]bool{}
		for _, r := range vec {
			svc, kind := r.labels[labelService], r.labels[labelKind]
			if seen[[2]string{svc, kind}] {
				return nil, fmt.Errorf("%w: query %s: two series for %s=%q, %s=%q", errPromUnreachable, c.query, labelService, svc, labelKind, kind)
			}
			seen[[2]string{svc, kind}] = true
			ks := get(svc)
			switch kind {
			case "gray":
				c.set(&ks.gray, r.value)
			case "prod":
				c.set(&ks.prod, r.value)
			default:
				continue
			}
			out[svc] = ks
		}
	}
	vec, err := p.vector(ctx, q.buckets, at)
	if err != nil {
		return nil, err
	}
	seen := map[[3]string]bool{}
	for _, r := range vec {
		svc, kind, le := r.labels[labelService], r.labels[labelKind], r.labels["le"]
		bound, perr := strconv.ParseFloat(le, 64)
		if perr != nil {
			return nil, fmt.Errorf("%w: query %s: bucket bound le=%q", errPromUnreachable, q.buckets, firstLine(le, 40))
		}
		if seen[[3]string{svc, kind, le}] {
			return nil, fmt.Errorf("%w: query %s: two series for %s=%q, %s=%q, le=%q", errPromUnreachable, q.buckets, labelService, svc, labelKind, kind, le)
		}
		seen[[3]string{svc, kind, le}] = true
		ks := get(svc)
		var s *sample
		switch kind {
		case "gray":
			s = &ks.gray
		case "prod":
			s = &ks.prod
		default:
			continue
		}
		if len(s.Buckets) >= maxBuckets {
			return nil, fmt.Errorf("%w: query %s: more than %d buckets", errPromUnreachable, q.buckets, maxBuckets)
		}
		s.Buckets = append(s.Buckets, bucket{Le: bound, Count: r.value})
		out[svc] = ks
	}
	return out, nil
}

// withSeries returns which of services Prometheus has series of metric's
// count for now (of any kind, any caller).
func (p *prometheus) withSeries(ctx context.Context, metric string, services []string) (map[string]bool, error) {
	vec, err := p.vector(ctx, "count by ("+labelService+") ("+metric+"_count{"+serviceSelector(services)+"})", time.Time{})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range vec {
		out[r.labels[labelService]] = r.value > 0
	}
	return out, nil
}

// seriesByKind returns how many series of metric's count Prometheus has
// now of each of services, by kind.
func (p *prometheus) seriesByKind(ctx context.Context, metric string, services []string) (map[string]map[string]float64, error) {
	vec, err := p.vector(ctx, "count by ("+labelService+", "+labelKind+") ("+metric+"_count{"+serviceSelector(services)+"})", time.Time{})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	for _, r := range vec {
		svc := r.labels[labelService]
		if out[svc] == nil {
			out[svc] = map[string]float64{}
		}
		out[svc][r.labels[labelKind]] += r.value
	}
	return out, nil
}
