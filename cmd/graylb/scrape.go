package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// errScrapeUnknown: Prometheus does not say how often it scrapes the
// callers (no /api/v1/targets, as behind a query front end; callers whose
// series carry no target's job and instance, as through federation).
var errScrapeUnknown = errors.New("cannot tell how often Prometheus scrapes the callers")

// scrapeInterval returns how often Prometheus scrapes the callers of
// services: the longest scrape interval among the targets (job, instance)
// their series of metric come from, as /api/v1/targets gives it, and
// which target that is. An error wraps errPromUnreachable (Prometheus did
// not answer the query) or errScrapeUnknown.
func (p *prometheus) scrapeInterval(ctx context.Context, metric string, services []string) (time.Duration, string, error) {
	vec, err := p.vector(ctx, "group by ("+labelJob+", "+labelInstance+") ("+metric+"_count{"+serviceSelector(services)+"})", time.Time{})
	if err != nil {
		return 0, "", err
	}
	callers := map[[2]string]bool{}
	for _, r := range vec {
		if j, i := r.labels[labelJob], r.labels[labelInstance]; j != "" || i != "" {
			callers[[2]string{j, i}] = true
		}
	}
	if len(callers) == 0 {
		return 0, "", fmt.Errorf("%w: its series carry no job and instance labels", errScrapeUnknown)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/targets?state=active", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", errPromUnreachable, cause(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPromAnswer+1))
	if err != nil || len(body) > maxPromAnswer {
		return 0, "", fmt.Errorf("%w: its targets (/api/v1/targets) could not be read", errScrapeUnknown)
	}
	var ans struct {
		Status string `json:"status"`
		Data   struct {
			ActiveTargets []struct {
				Labels         map[string]string `json:"labels"`
				ScrapeInterval string            `json:"scrapeInterval"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Status != "success" {
		return 0, "", fmt.Errorf("%w: /api/v1/targets answered %d with no target list", errScrapeUnknown, resp.StatusCode)
	}
	var longest time.Duration
	var which string
	matched := 0
	for _, tg := range ans.Data.ActiveTargets {
		if !callers[[2]string{tg.Labels[labelJob], tg.Labels[labelInstance]}] {
			continue
		}
		d, ok := parsePromDuration(tg.ScrapeInterval)
		if !ok {
			continue
		}
		matched++
		if d > longest {
			longest, which = d, "job="+strconv.Quote(tg.Labels[labelJob])+", instance="+strconv.Quote(tg.Labels[labelInstance])
		}
	}
	if matched == 0 {
		names := make([]string, 0, len(callers))
		for c := range callers {
			names = append(names, c[0]+"/"+c[1])
		}
		slices.Sort(names)
		if len(names) > 3 {
			names = append(names[:3], "…")
		}
		return 0, "", fmt.Errorf("%w: none of its targets is the target of the callers' series (%s)", errScrapeUnknown, strings.Join(names, ", "))
	}
	return longest, which, nil
}

var promDurationRE = regexp.MustCompile(`^(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?(?:([0-9]+)ms)?$`)

// parsePromDuration parses a duration as Prometheus writes it (1m30s, 1d).
func parsePromDuration(s string) (time.Duration, bool) {
	m := promDurationRE.FindStringSubmatch(s)
	if m == nil || s == "" {
		return 0, false
	}
	units := []time.Duration{365 * 24 * time.Hour, 7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second, time.Millisecond}
	var d time.Duration
	for i, u := range units {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(1<<62)/int64(u) {
			return 0, false
		}
		d += time.Duration(n) * u
	}
	return d, d > 0
}
