package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// shadowStatusWindow is how far back status counts the shadow copies.
const shadowStatusWindow = 5 * time.Minute

// shadowStatus is the dark launch as status shows it: the rules' share of
// prod requests mirrored to the gray build and, from Prometheus when the
// command has it, what the callers told of the copies lately.
type shadowStatus struct {
	Percent    float64               `json:"percent"`
	Prometheus string                `json:"prometheus,omitempty"`
	Window     string                `json:"window,omitempty"`
	Services   []shadowServiceCounts `json:"services"`
	// NotRead says why there are no live counts: no Prometheus given, or
	// its error.
	NotRead string `json:"notRead,omitempty"`
}

// shadowServiceCounts are one service's shadow counts.
type shadowServiceCounts struct {
	Service string `json:"service"`
	shadowSample
}

// shadowOf reads the shadow counts of services (every service when none)
// from Prometheus at prom ("" when the command has none).
func shadowOf(ctx context.Context, g *globals, e env, prom string, services []string, percent float64) *shadowStatus {
	s := &shadowStatus{Percent: percent, Services: []shadowServiceCounts{}}
	if prom == "" {
		s.NotRead = "no Prometheus given (--prometheus or $" + envPrometheus + "): the live counts are in the callers' graylb_shadow_total"
		return s
	}
	u, err := url.Parse(prom)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		s.NotRead = fmt.Sprintf("--prometheus %q is not an http(s) URL", prom)
		return s
	}
	c := e.http
	if c == nil {
		c = http.DefaultClient
	}
	pc := *c
	pc.Timeout = g.timeout
	p := &prometheus{base: strings.TrimSuffix(prom, "/"), client: &pc}
	s.Prometheus, s.Window = p.base, shadowStatusWindow.String()
	got, err := p.shadowCounts(ctx, shadowQueriesFor(defaultMetric, services, shadowStatusWindow), time.Time{})
	if err != nil {
		s.NotRead = err.Error()
		return s
	}
	for _, svc := range slices.Sorted(maps.Keys(got)) {
		s.Services = append(s.Services, shadowServiceCounts{Service: svc, shadowSample: got[svc]})
	}
	return s
}

// printShadow writes the shadow share and counts as text.
func printShadow(w io.Writer, s *shadowStatus) {
	if s == nil {
		return
	}
	share := "off (shadowPercent 0)"
	if s.Percent > 0 {
		share = strconv.FormatFloat(s.Percent, 'f', -1, 64) + "% of prod requests mirrored to the gray build"
	}
	if s.NotRead != "" {
		fmt.Fprintf(w, "shadow: %s; live counts not read: %s\n", share, s.NotRead)
		return
	}
	if len(s.Services) == 0 {
		fmt.Fprintf(w, "shadow: %s; no shadow copy counted in the last %s (Prometheus at %s)\n", share, s.Window, s.Prometheus)
		return
	}
	fmt.Fprintf(w, "shadow: %s; copies in the last %s (Prometheus at %s):\n", share, s.Window, s.Prometheus)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVICE\tSAME\tDIFFERS (STATUS/LATENCY/BODY)\tFAILED\tDROPPED\tWRITES BLOCKED")
	for _, c := range s.Services {
		fmt.Fprintf(tw, "  %s\t%.0f\t%.0f (%.0f/%.0f/%.0f)\t%.0f\t%.0f\t%.0f\n", printable(c.Service), c.Same, c.Differs,
			c.ByStatus, c.ByLatency, c.ByBody, c.Failed, c.Dropped, c.BlockedWrites)
	}
	tw.Flush()
}
