package main

import (
	"context"
	"fmt"
	"time"
)

// The shadow metrics as otelgraylb's ShadowObserver records them, with the
// names the OpenTelemetry Prometheus exporter gives them: shadow events by
// service, route and outcome; differing copies by service, route and what
// differed.
const (
	metricShadow       = "graylb_shadow_total"
	metricShadowDiffs  = "graylb_shadow_differences_total"
	labelShadowOutcome = "graylb_shadow_outcome"
	labelShadowBy      = "graylb_shadow_by"
)

// shadowSample is what one service's callers told of its shadow copies
// over a window.
type shadowSample struct {
	Same    float64 `json:"same"`    // answered as prod did
	Differs float64 `json:"differs"` // answered otherwise (see By*)
	Failed  float64 `json:"failed"`  // got no answer (no gray instance, an error, the copy timeout)
	Dropped float64 `json:"dropped"` // not sent: the mirror's bounds were full
	// BlockedWrites are writes refused under the shadow mark; Noise the
	// paths learned as noise.
	BlockedWrites float64 `json:"blockedWrites"`
	Noise         float64 `json:"noise"`
	// ByStatus, ByLatency, ByBody count the differing copies by what
	// differed (a copy can differ in more than one).
	ByStatus  float64 `json:"byStatus"`
	ByLatency float64 `json:"byLatency"`
	ByBody    float64 `json:"byBody"`
}

// Compared is the copies whose answer was compared with the primary's, or
// that failed: what the shadow phase judges.
func (s shadowSample) Compared() float64 { return s.Same + s.Differs + s.Failed }

// shadowQueries are the two queries of the shadow counts.
type shadowQueries struct{ outcomes, by string }

// shadowQueriesFor builds the queries of the shadow counts of services
// (every service when none) over window up to now, each counter series
// counted as the step's calls are (see grown): a series born in the window
// counts whole, which a shadow phase's first events are. The targets
// scraped at the window's start are those with series of callMetric's
// count then.
func shadowQueriesFor(callMetric string, services []string, window time.Duration) shadowQueries {
	sel := labelService + `!=""`
	if len(services) > 0 {
		sel = serviceSelector(services)
	}
	scraped := "group by (" + labelJob + ", " + labelInstance + ") (" + callMetric + "_count offset " + promDuration(window) + ")"
	return shadowQueries{
		outcomes: "sum by (" + labelService + ", " + labelShadowOutcome + ") (" + grown(metricShadow+"{"+sel+"}", scraped, window) + ")",
		by:       "sum by (" + labelService + ", " + labelShadowBy + ") (" + grown(metricShadowDiffs+"{"+sel+"}", scraped, window) + ")",
	}
}

// shadowCounts reads the shadow counts of each service at time at (zero:
// Prometheus' now). A service without series is absent; a value that is
// not a finite, non-negative number counts as none.
func (p *prometheus) shadowCounts(ctx context.Context, q shadowQueries, at time.Time) (map[string]shadowSample, error) {
	out := map[string]shadowSample{}
	for _, c := range []struct {
		query, label string
		field        func(s *shadowSample, key string) *float64
	}{
		{q.outcomes, labelShadowOutcome, func(s *shadowSample, k string) *float64 {
			return map[string]*float64{"same": &s.Same, "differs": &s.Differs, "failed": &s.Failed, "dropped": &s.Dropped,
				"blocked-write": &s.BlockedWrites, "noise": &s.Noise}[k]
		}},
		{q.by, labelShadowBy, func(s *shadowSample, k string) *float64 {
			return map[string]*float64{"status": &s.ByStatus, "latency": &s.ByLatency, "body": &s.ByBody}[k]
		}},
	} {
		vec, err := p.vector(ctx, c.query, at)
		if err != nil {
			return nil, err
		}
		seen := map[[2]string]bool{}
		for _, r := range vec {
			svc, k := r.labels[labelService], r.labels[c.label]
			if seen[[2]string{svc, k}] {
				return nil, fmt.Errorf("%w: query %s: two series for %s=%q, %s=%q", errPromUnreachable, c.query, labelService, svc, c.label, k)
			}
			seen[[2]string{svc, k}] = true
			s := out[svc]
			if f := c.field(&s, k); f != nil {
				*f = finite(max(r.value, 0))
			}
			out[svc] = s
		}
	}
	return out, nil
}
