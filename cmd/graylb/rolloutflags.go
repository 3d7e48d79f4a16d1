package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/graylb/graylb"
)

// rolloutFlags are rollout's own flags.
type rolloutFlags struct {
	service          string
	steps            string
	interval, window time.Duration
	poll, maxWait    time.Duration
	prometheus       string
	metric           string
	picksMetric      string
	minRequests      float64
	maxErrorIncrease float64
	maxLatencyRatio  float64
	latencySlack     time.Duration
	failureLimit     int
	restartLimit     int
	leaseTTL         time.Duration
	shadow           shadowFlags // the shadow phase's (shadowphase.go)
}

func (f *rolloutFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	promDefault := "http://127.0.0.1:9090"
	if v := getenv(envPrometheus); v != "" {
		promDefault = v
	}
	fs.StringVar(&f.service, "service", "", "the service released (its callers' metrics are compared); required")
	fs.StringVar(&f.steps, "steps", "1,5,25,50,100", "canary percentages, increasing, comma-separated")
	fs.DurationVar(&f.interval, "interval", 5*time.Minute, "time at each step before it is judged; at least two scrape intervals of the callers")
	fs.DurationVar(&f.window, "window", 0, "how far back a step's metrics reach at most; a step is judged on its own calls, from its write (default: --interval)")
	fs.DurationVar(&f.poll, "poll", 15*time.Second, "how often Prometheus is read (and progress printed) during a step")
	fs.DurationVar(&f.maxWait, "max-wait", 10*time.Minute, "how long past a step's interval to wait for enough traffic or for Prometheus before giving up")
	fs.StringVar(&f.prometheus, "prometheus", promDefault, "Prometheus base URL [$"+envPrometheus+"]")
	fs.StringVar(&f.metric, "metric", defaultMetric, "the call-duration histogram's Prometheus name")
	fs.StringVar(&f.picksMetric, "picks-metric", defaultPicksMetric, "the callers' picks counter's Prometheus name (otelgraylb's Observer): gray requests that fell back to prod count as failed gray calls; empty: not read")
	fs.Float64Var(&f.minRequests, "min-requests", 100, "calls gray (and prod, to compare with) must complete in the window before it is judged")
	fs.Float64Var(&f.maxErrorIncrease, "max-error-increase", 0.01, "how far gray's error ratio may exceed prod's (0.01: one percentage point)")
	fs.Float64Var(&f.maxLatencyRatio, "max-latency-ratio", 1.5, "gray's calls may take up to this times prod's (plus --latency-slack); 0 disables")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", defaultLeaseTTL, "how long the rollout's lease outlives its last renewal (renewed every third of it): a rollout that died blocks others this long")
	fs.DurationVar(&f.latencySlack, "latency-slack", 10*time.Millisecond, "absolute allowance added to the latency bound")
	fs.IntVar(&f.failureLimit, "failure-limit", 2, "checks in a row that must find gray worse before it is rolled back (a difference beyond doubt rolls back at once)")
	fs.IntVar(&f.restartLimit, "restart-limit", 2, "restarts of the gray instances since the rollout began (an address back in the registry after a read without it, or with a new graylb.started) that roll back, when prod's instances did not restart; 0: not judged")
	f.shadow.register(fs)
}

// parseSteps parses --steps: increasing valid canary percentages.
func parseSteps(s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		p, err := parsePercent(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("--steps: %w", err)
		}
		if len(out) > 0 && p <= out[len(out)-1] {
			return nil, fmt.Errorf("--steps: %v after %v: steps must increase", p, out[len(out)-1])
		}
		if p == 0 {
			return nil, errors.New("--steps: a step of 0 sends nothing gray to judge")
		}
		out = append(out, p)
	}
	if len(out) > 1000 {
		return nil, errors.New("--steps: more than 1000 steps")
	}
	return out, nil
}

func (f *rolloutFlags) check() error {
	if f.service == "" {
		return errors.New("--service is required")
	}
	if err := graylb.ValidateServiceName(f.service); err != nil {
		return fmt.Errorf("--service: %w", err)
	}
	u, err := url.Parse(f.prometheus)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--prometheus %q: an http(s) URL", f.prometheus)
	}
	f.prometheus = strings.TrimSuffix(f.prometheus, "/")
	for name, d := range map[string]time.Duration{"interval": f.interval, "poll": f.poll} {
		if d <= 0 {
			return fmt.Errorf("--%s %v: must be positive", name, d)
		}
	}
	if f.leaseTTL < time.Second {
		return fmt.Errorf("--lease-ttl %v: at least 1s", f.leaseTTL)
	}
	if f.window == 0 {
		f.window = f.interval
	}
	if f.window < time.Second || f.maxWait < 0 || f.latencySlack < 0 {
		return errors.New("--window must be at least 1s; --max-wait and --latency-slack not negative")
	}
	if f.failureLimit < 1 {
		return errors.New("--failure-limit must be at least 1")
	}
	if f.restartLimit < 0 {
		return errors.New("--restart-limit must not be negative (0: restarts not judged)")
	}
	if !(f.minRequests >= 1) || !(f.maxErrorIncrease >= 0 && f.maxErrorIncrease <= 1) || !(f.maxLatencyRatio >= 0) {
		return errors.New("--min-requests must be at least 1, --max-error-increase within 0-1, --max-latency-ratio not negative")
	}
	if strings.ContainsAny(f.metric, "{}[]() \"") || f.metric == "" {
		return fmt.Errorf("--metric %q: a metric name", f.metric)
	}
	if strings.ContainsAny(f.picksMetric, "{}[]() \"") {
		return fmt.Errorf("--picks-metric %q: a metric name, or empty", f.picksMetric)
	}
	return f.shadow.check()
}
