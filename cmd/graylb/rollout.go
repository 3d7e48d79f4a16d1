package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/graylb/graylb"
)

const rolloutLong = `Steps canaryPercent through --steps, one step every --interval. Between steps it compares
the gray kind with prod for --service as the callers see them, on the calls made since the step's
write: the error ratios and the call durations of the callers' graylb metrics (otelgraylb's
graylb.client.call.duration histogram, graylb_client_call_duration_seconds in Prometheus), read
from Prometheus' HTTP API. Each check tests for a difference beyond the thresholds (errors: a
test for two proportions; durations: a rank test over the histograms and a test of the tail);
a check finds gray worse at 1 % significance (docs/operations.md).

  - gray worse than prod beyond the thresholds (once gray completed --min-requests calls in the
    step) in --failure-limit checks in a row, or beyond doubt (0.1 %) in one: it rolls back by
    itself (closed: true) and exits 3 with the evidence;
  - healthy at the last step: it prints the next step (promote) and exits 0;
  - Prometheus unreachable or too little traffic: it waits and says so, never advances blind;
    after --max-wait past a step's interval without a verdict it exits 4, the rules left as
    they are;
  - interrupted (SIGINT, SIGTERM): the rules stay as they are, it says where, exit 130.

Every write is a read-modify-write with compare-and-set (see graylb canary).`

// rolloutFlags are rollout's own flags.
type rolloutFlags struct {
	service          string
	steps            string
	interval, window time.Duration
	poll, maxWait    time.Duration
	prometheus       string
	metric           string
	minRequests      float64
	maxErrorIncrease float64
	maxLatencyRatio  float64
	latencySlack     time.Duration
	failureLimit     int
}

func (f *rolloutFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	promDefault := "http://127.0.0.1:9090"
	if v := getenv(envPrometheus); v != "" {
		promDefault = v
	}
	fs.StringVar(&f.service, "service", "", "the service released (its callers' metrics are compared); required")
	fs.StringVar(&f.steps, "steps", "1,5,25,50,100", "canary percentages, increasing, comma-separated")
	fs.DurationVar(&f.interval, "interval", 5*time.Minute, "time at each step before it is judged")
	fs.DurationVar(&f.window, "window", 0, "how far back a step's metrics reach at most; a step is judged on its own calls, from its write (default: --interval)")
	fs.DurationVar(&f.poll, "poll", 15*time.Second, "how often Prometheus is read (and progress printed) during a step")
	fs.DurationVar(&f.maxWait, "max-wait", 10*time.Minute, "how long past a step's interval to wait for enough traffic or for Prometheus before giving up")
	fs.StringVar(&f.prometheus, "prometheus", promDefault, "Prometheus base URL [$"+envPrometheus+"]")
	fs.StringVar(&f.metric, "metric", defaultMetric, "the call-duration histogram's Prometheus name")
	fs.Float64Var(&f.minRequests, "min-requests", 100, "calls gray (and prod, to compare with) must complete in the window before it is judged")
	fs.Float64Var(&f.maxErrorIncrease, "max-error-increase", 0.01, "how far gray's error ratio may exceed prod's (0.01: one percentage point)")
	fs.Float64Var(&f.maxLatencyRatio, "max-latency-ratio", 1.5, "gray's calls may take up to this times prod's (plus --latency-slack); 0 disables")
	fs.DurationVar(&f.latencySlack, "latency-slack", 10*time.Millisecond, "absolute allowance added to the latency bound")
	fs.IntVar(&f.failureLimit, "failure-limit", 2, "checks in a row that must find gray worse before it is rolled back (a difference beyond doubt rolls back at once)")
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
	if f.window == 0 {
		f.window = f.interval
	}
	if f.window < time.Second || f.maxWait < 0 || f.latencySlack < 0 {
		return errors.New("--window must be at least 1s; --max-wait and --latency-slack not negative")
	}
	if f.failureLimit < 1 {
		return errors.New("--failure-limit must be at least 1")
	}
	if !(f.minRequests >= 1) || !(f.maxErrorIncrease >= 0 && f.maxErrorIncrease <= 1) || !(f.maxLatencyRatio >= 0) {
		return errors.New("--min-requests must be at least 1, --max-error-increase within 0-1, --max-latency-ratio not negative")
	}
	if strings.ContainsAny(f.metric, "{}[]() \"") || f.metric == "" {
		return fmt.Errorf("--metric %q: a metric name", f.metric)
	}
	return nil
}

// stepReport is one step of a rollout.
type stepReport struct {
	Canary  float64 `json:"canaryPercent"`
	Verdict string  `json:"verdict"`
	Reason  string  `json:"reason"`
	Gray    *sample `json:"gray,omitempty"`
	Prod    *sample `json:"prod,omitempty"`
}

// rolloutResult is what rollout prints at its end.
type rolloutResult struct {
	Service string `json:"service"`
	// Outcome: healthy, rolled-back, no-verdict, interrupted, failed.
	Outcome string       `json:"outcome"`
	Canary  float64      `json:"canaryPercent"` // where the rules are left
	Closed  bool         `json:"closed"`
	Steps   []stepReport `json:"steps"`
	Message string       `json:"message"`
	Next    string       `json:"next,omitempty"`
}

func runRollout(ctx context.Context, g *globals, e env, f *rolloutFlags) int {
	if err := f.check(); err != nil {
		fmt.Fprintf(e.stderr, "graylb rollout: %v\n", err)
		return exitUsage
	}
	steps, err := parseSteps(f.steps)
	if err != nil {
		fmt.Fprintf(e.stderr, "graylb rollout: %v\n", err)
		return exitUsage
	}
	st, err := g.openStore(e)
	if err != nil {
		return fail(e, err)
	}
	defer st.close()
	c := e.http
	if c == nil {
		c = http.DefaultClient
	}
	pc := *c
	pc.Timeout = g.timeout
	r := &rollout{g: g, e: e, f: f, st: st, steps: steps,
		prom: &prometheus{base: f.prometheus, client: &pc},
		th: thresholds{MinRequests: f.minRequests, MaxErrorIncrease: f.maxErrorIncrease,
			MaxLatencyRatio: f.maxLatencyRatio, LatencySlack: f.latencySlack, FailureLimit: f.failureLimit},
		res: rolloutResult{Service: f.service, Steps: []stepReport{}}}
	code := r.run(ctx)
	if g.output == "json" {
		printJSON(e.stdout, r.res)
	} else {
		fmt.Fprintln(e.stdout, r.res.Message)
		if r.res.Next != "" {
			fmt.Fprintln(e.stdout, "next: "+r.res.Next)
		}
	}
	return code
}

type rollout struct {
	g     *globals
	e     env
	f     *rolloutFlags
	st    store
	steps []float64
	prom  *prometheus
	th    thresholds
	res   rolloutResult
}

func (r *rollout) logf(format string, args ...any) {
	fmt.Fprintf(r.e.stderr, time.Now().UTC().Format("15:04:05")+" "+format+"\n", args...)
}

func (r *rollout) run(ctx context.Context) int {
	cur, err := r.st.get(ctx)
	if err == nil {
		var rules graylb.Rules
		if rules, err = parseStored(cur); err == nil {
			r.res.Canary, r.res.Closed = rules.CanaryPercent, rules.Closed
			if rules.Closed {
				err = errors.New("the rules are closed (rolled back): graylb resume first, once the cause is fixed")
			} else if rules.Enabled != nil && !*rules.Enabled {
				err = errors.New("gray routing is off (enabled: false): the canary would change nothing")
			}
		}
	}
	if err != nil {
		r.res.Outcome, r.res.Message = "failed", "rollout not started: "+err.Error()
		return exitFailed
	}
	r.logf("rollout of %s: steps %v%% every %s, rules in %s, metrics from %s", r.f.service, r.steps, r.f.interval, r.st.describe(), r.f.prometheus)
	for i, p := range r.steps {
		_, err := modify(ctx, r.st, false, raiseCanary(p))
		if errors.Is(err, errClosedByOthers) {
			r.res.Outcome, r.res.Closed = "failed", true
			r.res.Message = fmt.Sprintf("someone closed the rules before step %d (canary %v%%) was written; stopping, they stay closed in %s", i+1, p, r.st.describe())
			return exitFailed
		}
		if errors.Is(err, errRoutingOff) {
			r.res.Outcome = "failed"
			r.res.Message = fmt.Sprintf("someone switched gray routing off (enabled: false) before step %d (canary %v%%) was written; stopping: %s; the rules stay at canary %v%% in %s",
				i+1, p, routingOffNote, r.res.Canary, r.st.describe())
			return exitFailed
		}
		if err != nil {
			if ctx.Err() != nil {
				return r.interrupted(ctx)
			}
			r.res.Outcome = "failed"
			r.res.Message = fmt.Sprintf("could not set canary %v%%: %v; the rules are as %s holds them (canary %v%%)", p, err, r.st.describe(), r.res.Canary)
			return exitFailed
		}
		r.res.Canary = p
		r.logf("step %d/%d: canary %v%% set", i+1, len(r.steps), p)
		start := time.Now()
		step := stepReport{Canary: p}
		sj := newStepJudge(r.th)
		for {
			select {
			case <-ctx.Done():
				r.res.Steps = append(r.res.Steps, step)
				return r.interrupted(ctx)
			case <-time.After(r.f.poll):
			}
			elapsed := time.Since(start)
			switch err := r.changedByOthers(ctx); {
			case errors.Is(err, errClosedByOthers):
				r.res.Steps = append(r.res.Steps, step)
				r.res.Outcome, r.res.Closed = "failed", true
				r.res.Message = fmt.Sprintf("someone closed the rules during step %d (canary %v%%); stopping, they stay closed in %s", i+1, p, r.st.describe())
				return exitFailed
			case errors.Is(err, errRoutingOff):
				r.res.Steps = append(r.res.Steps, step)
				r.res.Outcome = "failed"
				r.res.Message = fmt.Sprintf("someone switched gray routing off (enabled: false) during step %d (canary %v%%); stopping: %s; the rules stay as they are in %s",
					i+1, p, routingOffNote, r.st.describe())
				return exitFailed
			}
			gray, prod, err := r.prom.compare(ctx, queriesFor(r.f.metric, r.f.service, stepWindow(elapsed, r.f.window)))
			var v verdict
			var why string
			if err != nil {
				if ctx.Err() != nil {
					continue // the select above reports it
				}
				v, why = verdictWait, err.Error()
			} else {
				v, why = sj.check(gray, prod)
				step.Gray, step.Prod = &gray, &prod
			}
			step.Verdict, step.Reason = v.String(), why
			switch {
			case v == verdictUnhealthy:
				r.res.Steps = append(r.res.Steps, step)
				return r.rollback(ctx, why)
			case elapsed >= r.f.interval && v == verdictHealthy:
				r.logf("step %d/%d: canary %v%% healthy after %s: %s", i+1, len(r.steps), p, elapsed.Round(time.Second), why)
			case elapsed >= r.f.interval+r.f.maxWait:
				r.res.Steps = append(r.res.Steps, step)
				r.res.Outcome = "no-verdict"
				r.res.Message = fmt.Sprintf("no verdict at canary %v%% within %s (%s): giving up; the rules stay at canary %v%% in %s",
					p, r.f.interval+r.f.maxWait, why, p, r.st.describe())
				return exitNoData
			case elapsed >= r.f.interval:
				r.logf("step %d/%d: canary %v%%: waiting, not advancing blind: %s (%s left of --max-wait)", i+1, len(r.steps), p, why,
					(r.f.interval + r.f.maxWait - elapsed).Round(time.Second))
				continue
			default:
				r.logf("step %d/%d: canary %v%%: %s of %s: %s: %s", i+1, len(r.steps), p, elapsed.Round(time.Second), r.f.interval, v, why)
				continue
			}
			break
		}
		r.res.Steps = append(r.res.Steps, step)
	}
	last := r.steps[len(r.steps)-1]
	r.res.Outcome = "healthy"
	r.res.Message = fmt.Sprintf("%s: gray healthy through canary %v%%; the rules stay at canary %v%% in %s", r.f.service, last, last, r.st.describe())
	if last == 100 {
		r.res.Next = "promote: deploy the gray build as prod (its instances without gray=true), then set the canary back to 0 (graylb canary 0) for the next release"
	} else {
		r.res.Next = "continue: graylb rollout --steps " + strconv.FormatFloat(last, 'f', -1, 64) + ",...,100, or promote"
	}
	return exitOK
}

// stepWindow is the window a step's check reads: the time since the
// step's write, at most max, at least a second.
func stepWindow(elapsed, max time.Duration) time.Duration {
	w := min(elapsed, max)
	if w < time.Second {
		w = time.Second
	}
	return w
}

// errClosedByOthers: a step's write found the rules closed.
var errClosedByOthers = errors.New("the rules are closed")

// errRoutingOff: a step's write found gray routing switched off.
var errRoutingOff = errors.New("gray routing is switched off (enabled: false)")

// routingOffNote says why a rollout stops when gray routing is off.
const routingOffNote = "every instance serves every request, so the callers' gray and prod calls no longer tell the builds apart"

// raiseCanary is a step's write: the canary, unless the rules are closed
// or gray routing is switched off (someone changed them between the
// rollout's reads and this write, which may be the retry after a
// conflict): such rules are left untouched, so graylb resume reopens them
// at the canary they were closed at.
func raiseCanary(p float64) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		if r.Closed {
			return errClosedByOthers
		}
		if r.Enabled != nil && !*r.Enabled {
			return errRoutingOff
		}
		r.CanaryPercent = p
		return nil
	}
}

// changedByOthers reads the rules: closed by someone else (graylb
// rollback by hand, a console: errClosedByOthers) or gray routing switched
// off (errRoutingOff) stops the rollout. A failed read or a document that
// does not parse is neither (the step's judging goes on).
func (r *rollout) changedByOthers(ctx context.Context) error {
	d, err := r.st.get(ctx)
	if err != nil {
		return err
	}
	rules, err := parseStored(d)
	switch {
	case err != nil:
		return err
	case rules.Closed:
		return errClosedByOthers
	case rules.Enabled != nil && !*rules.Enabled:
		return errRoutingOff
	}
	return nil
}

// rollback closes the rules, on a context a signal does not cancel: a
// rollback once decided is carried out.
func (r *rollout) rollback(ctx context.Context, why string) int {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*r.g.timeout)
	defer cancel()
	r.logf("gray is worse than prod: %s; rolling back (closed: true)", why)
	if _, err := closeRules(wctx, r.st, false); err != nil {
		r.res.Outcome = "failed"
		r.res.Message = fmt.Sprintf("gray is worse than prod (%s) but the rollback failed: %v; the rules stay at canary %v%%: close them by hand (graylb rollback)", why, err, r.res.Canary)
		return exitFailed
	}
	r.res.Outcome, r.res.Closed = "rolled-back", true
	r.res.Message = fmt.Sprintf("%s rolled back at canary %v%%: %s; the rules are closed (closed: true, canary %v%% kept) in %s",
		r.f.service, r.res.Canary, why, r.res.Canary, r.st.describe())
	r.res.Next = "fix the gray build; graylb resume reopens the rules at the same canary (or graylb canary 0 first)"
	return exitRollback
}

func (r *rollout) interrupted(ctx context.Context) int {
	r.res.Outcome = "interrupted"
	// Read back what is stored: a step's write may have been in flight.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.g.timeout)
	defer cancel()
	where := fmt.Sprintf("canary %v%% (closed: %t)", r.res.Canary, r.res.Closed)
	if d, err := r.st.get(rctx); err != nil {
		where += fmt.Sprintf(" as last written; reading them back failed: %v", err)
	} else if rules, err := parseStored(d); err == nil {
		r.res.Canary, r.res.Closed = rules.CanaryPercent, rules.Closed
		where = fmt.Sprintf("canary %v%% (closed: %t)", rules.CanaryPercent, rules.Closed)
	}
	r.res.Message = fmt.Sprintf("interrupted: the rules stay where they were, %s in %s", where, r.st.describe())
	return exitSignal
}
