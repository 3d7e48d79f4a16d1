package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/graylb/graylb"
)

const rolloutLong = `Steps canaryPercent through --steps, one step every --interval. Between steps it compares
the gray kind with prod as the callers see them, on the calls made since the step's write, for
--service and for every other service with gray instances registered in Nacos at the step (the
canary draws requests: each of them takes the step's share): the error ratios and the call
durations of the callers' graylb metrics (otelgraylb's graylb.client.call.duration histogram,
graylb_client_call_duration_seconds in Prometheus), read from Prometheus' HTTP API. The gray
requests the callers sent to prod because their outlier detection ejected (or paused) the gray
instances (otelgraylb's picks, graylb_picks_total with outcome fell_back) count as failed gray
calls, while the rules are open and the registry lists a gray instance of the service. Each check
tests for a difference beyond the thresholds (errors: a test for two proportions; durations: a
rank test over the histograms and a test of the tail); a check finds gray worse at 1 %
significance (docs/operations.md).

  - gray worse than prod beyond the thresholds (once gray completed --min-requests calls in the
    step) in --failure-limit checks in a row, or beyond doubt (0.1 %) in one, for any service
    judged: it rolls back by itself (closed: true) and exits 3 with the evidence;
  - the gray instances of a service judged restarted --restart-limit times since the rollout
    began while its prod instances did not (the registry, read at every check and every 100 ms
    between them, lists them again on their addresses after a read that did not, or with a new
    graylb.started, which nacos.Register writes): it rolls back the same way;
  - healthy at the last step: it prints the next step (promote) and exits 0;
  - Prometheus unreachable or too little traffic: it waits and says so, never advances blind;
    after --max-wait past a step's interval without a verdict it exits 4, the rules left as
    they are;
  - interrupted (SIGINT, SIGTERM): the rules stay as they are, it says where, exit 130.

It writes nothing, not even its lease, and says why, on closed rules; on a --service that has no
instance registered in Nacos, or none gray that takes requests; when Prometheus does not answer or
has no series of the service's calls (exit 1); or when --interval or --window is shorter than two
scrapes of the callers, as Prometheus' targets give their scrape interval (exit 2).

One rollout at a time: it holds a lease beside the rules (renewed every third of --lease-ttl);
a second rollout refuses at once and names the holder; a lease not renewed for --lease-ttl (its
holder died) is taken over, saying whose it was. graylb status shows a running rollout.

Any change to the rules by someone else (canary, users, addresses, matches, closed, enabled)
stops it: exit 1, the rules left as the other writer left them, and what changed is printed.
Every write is compare-and-set where the store has it, and is read back (see graylb canary).`

// stepReport is one step of a rollout.
type stepReport struct {
	Canary  float64 `json:"canaryPercent"`
	Verdict string  `json:"verdict"`
	Reason  string  `json:"reason"`
	// Gray and Prod are the released service's samples.
	Gray *sample `json:"gray,omitempty"`
	Prod *sample `json:"prod,omitempty"`
	// Services are every service judged in the step (the released one
	// first); NotJudged says why services with gray instances were not.
	Services  []serviceReport   `json:"services,omitempty"`
	NotJudged map[string]string `json:"notJudged,omitempty"`
}

// rolloutResult is what rollout prints at its end.
type rolloutResult struct {
	Service string `json:"service"`
	// Outcome: healthy, rolled-back, no-verdict, interrupted, failed.
	Outcome string       `json:"outcome"`
	Canary  float64      `json:"canaryPercent"` // where the rules are left
	Closed  bool         `json:"closed"`
	Steps   []stepReport `json:"steps"`
	// Shadow is the shadow phase (--shadow), when there was one.
	Shadow  *shadowReport `json:"shadow,omitempty"`
	Message string        `json:"message"`
	Next    string        `json:"next,omitempty"`
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
	reg, err := g.nacosAPI(e)
	if err != nil {
		return fail(e, err)
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
	r := &rollout{g: g, e: e, f: f, st: st, reg: reg, steps: steps,
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
	reg   *nacosAPI // the registry: the instances of the services
	steps []float64
	prom  *prometheus
	th    thresholds
	res   rolloutResult
	// expected are the rules as the rollout last wrote them (read them,
	// before its first step): any other rules are someone else's change.
	expected graylb.Rules
	// watch is what the reads of the registry found of each judged service
	// (see readRegistry).
	watch registryWatch
}

func (r *rollout) logf(format string, args ...any) {
	fmt.Fprintf(r.e.stderr, time.Now().UTC().Format("15:04:05")+" "+format+"\n", args...)
}

func (r *rollout) run(ctx context.Context) int {
	cur, err := r.st.get(ctx)
	var rules graylb.Rules
	if err == nil {
		if rules, err = parseStored(cur); err == nil {
			r.res.Canary, r.res.Closed = rules.CanaryPercent, rules.Closed
			if rules.Closed {
				err = errors.New("the rules are closed (rolled back): graylb resume first, once the cause is fixed")
			} else if rules.Enabled != nil && !*rules.Enabled {
				err = errors.New("gray routing is off (enabled: false): the canary would change nothing")
			}
		}
	}
	if err == nil {
		err = r.checkReleased(ctx, rules)
	}
	if err == nil {
		err = r.f.shadow.checkRules(rules)
	}
	var set judgedSet
	if err == nil {
		set, err = r.discover(ctx, rules)
	}
	code := exitFailed
	if err == nil {
		code, err = r.checkJudgeable(ctx, set)
	}
	if err != nil {
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		r.res.Outcome, r.res.Message = "failed", "rollout not started: "+err.Error()
		return code
	}
	l, note, err := acquireLease(ctx, r.st, newLeaseRecord(r.f.service, r.steps, time.Now()), r.f.leaseTTL)
	if err != nil {
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		r.res.Outcome, r.res.Message = "failed", "rollout not started: "+err.Error()
		return exitFailed
	}
	if note != "" {
		r.logf("%s", note)
	}
	lctx, stopKeeping := context.WithCancel(ctx)
	lost, nudge, waitKept := l.keep(lctx)
	defer func() {
		stopKeeping()
		waitKept()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.g.timeout)
		defer cancel()
		if err := l.release(rctx); err != nil {
			r.logf("releasing the lease %s failed (it expires by itself within %s): %v", l.item.describe(), r.f.leaseTTL, err)
		}
	}()
	r.expected = rules
	r.logf("rollout of %s: steps %v%% every %s, rules in %s, metrics from %s, lease %s", r.f.service, r.steps, r.f.interval, r.st.describe(), r.f.prometheus, l.item.describe())
	// The instances before the first step (what later reads find gone or
	// with a new start time is a restart), then every registryEvery.
	r.watchServices(set.services, r.expected)
	r.readRegistry(ctx, set.services)
	wctx, stopWatch := context.WithCancel(ctx)
	waitWatch := r.watchRegistry(wctx)
	defer func() {
		stopWatch()
		waitWatch()
	}()
	if code, done := r.shadowPhase(ctx, set, l, lost, nudge); done {
		return code
	}
	for i, p := range r.steps {
		if i > 0 {
			// The services whose gray instances take the step's share:
			// those registered now (a failed read keeps the last ones).
			if next, err := r.discover(ctx, r.expected); err != nil {
				if ctx.Err() != nil {
					return r.interrupted(ctx)
				}
				r.logf("step %d/%d: reading which services have gray instances failed: %v; judging those of the last step", i+1, len(r.steps), err)
			} else {
				set = next
			}
		}
		res, err := modify(ctx, r.st, false, stepTo(p, r.expected))
		var ch *changedError
		if errors.As(err, &ch) {
			return r.changedByOthers(ch, fmt.Sprintf("before step %d (canary %v%%) was written", i+1, p))
		}
		if err != nil {
			if ctx.Err() != nil {
				return r.interrupted(ctx)
			}
			r.res.Outcome = "failed"
			r.res.Message = fmt.Sprintf("could not set canary %v%%: %v; the rules are as %s holds them", p, err, r.st.describe())
			return exitFailed
		}
		r.expected = res.After
		r.watchServices(set.services, r.expected)
		r.res.Canary = p
		l.at(i+1, p)
		nudge()
		r.logf("step %d/%d: canary %v%% set; judging %s", i+1, len(r.steps), p, set.describe())
		for _, svc := range slices.Sorted(maps.Keys(set.notJudged)) {
			r.logf("step %d/%d: %s: not judged: %s", i+1, len(r.steps), svc, set.notJudged[svc])
		}
		start := time.Now()
		r.watchStep()
		step := stepReport{Canary: p, NotJudged: set.notJudged}
		judges := map[string]*stepJudge{}
		for _, svc := range set.services {
			judges[svc] = newStepJudge(r.th)
		}
		for {
			select {
			case <-ctx.Done():
				r.res.Steps = append(r.res.Steps, step)
				return r.interrupted(ctx)
			case err := <-lost:
				r.res.Steps = append(r.res.Steps, step)
				return r.leaseLost(err)
			case <-time.After(r.f.poll):
			}
			elapsed := time.Since(start)
			if ch := r.checkUnchanged(ctx); ch != nil {
				r.res.Steps = append(r.res.Steps, step)
				return r.changedByOthers(ch, fmt.Sprintf("during step %d (canary %v%%)", i+1, p))
			}
			r.checkRegistry(ctx, set.services, fmt.Sprintf("step %d/%d", i+1, len(r.steps)))
			window := stepWindow(elapsed, r.f.window)
			got, err := r.prom.compare(ctx, queriesFor(r.f.metric, set.services, window), time.Time{})
			var fbs map[string]fallBack
			if err == nil && r.f.picksMetric != "" {
				fbs, err = r.prom.fallBacks(ctx, fallBackQueriesFor(r.f.picksMetric, r.f.metric, set.services, window), time.Time{})
			}
			var v verdict
			var why string
			if err != nil {
				if ctx.Err() != nil {
					continue // the select above reports it
				}
				v, why = verdictWait, err.Error()
				if bad := r.restartRollback(set.services); bad != "" {
					v, why = verdictUnhealthy, bad
				}
			} else {
				ev := map[string]evidence{}
				for _, svc := range set.services {
					ev[svc] = r.withRestarts(svc, r.fallBackEvidence(svc, fbs[svc]))
				}
				v, why, step.Services = judgeAll(set, judges, got, ev, r.noCallsNotes(ctx, set, got))
				step.Gray, step.Prod = step.Services[0].Gray, step.Services[0].Prod
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
				r.logf("step %d/%d: canary %v%%: %s of %s: %s", i+1, len(r.steps), p, elapsed.Round(time.Second), r.f.interval, why)
				continue
			}
			break
		}
		r.res.Steps = append(r.res.Steps, step)
	}
	last := r.steps[len(r.steps)-1]
	r.res.Outcome = "healthy"
	r.res.Message = fmt.Sprintf("%s: gray healthy through canary %v%% (and every service judged with it); the rules stay at canary %v%% in %s", r.f.service, last, last, r.st.describe())
	if last == 100 {
		r.res.Next = "promote: deploy the gray build as prod (its instances without gray=true), then set the canary back to 0 (graylb canary 0) for the next release"
	} else {
		r.res.Next = "continue: graylb rollout --steps " + strconv.FormatFloat(last, 'f', -1, 64) + ",...,100, or promote"
	}
	return exitOK
}

// Why a rollout does not start on the service it is given.
var (
	errNotRegistered = errors.New("no instance registered")
	errNoGray        = errors.New("no gray instance takes requests")
)

// checkReleased fails unless the released service has instances in the
// registry, gray ones among them that take requests under rules (gray by
// metadata or address; healthy, enabled, weighted): a canary written for
// a service that is not there (a typo) sends its share of every chain's
// requests to the gray instances of other services, and judges nothing.
func (r *rollout) checkReleased(ctx context.Context, rules graylb.Rules) error {
	list, err := r.reg.instances(ctx, r.f.service, r.g.group)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("%s: %w in %s: is the name right? (graylb status lists the services registered)", r.f.service, errNotRegistered, r.registryPlace())
	}
	s, err := classify(ctx, r.f.service, list, rules, r.g.grayKey, r.g.versionKey)
	if err != nil {
		return err
	}
	if s.Gray == 0 {
		return fmt.Errorf("%s: %w (%d registered in %s; gray by the %s=true metadata or the rules' grayAddresses, and healthy, enabled, weight above 0): register the gray build first",
			r.f.service, errNoGray, len(list), r.registryPlace(), r.g.grayKey)
	}
	return nil
}

// Why a rollout does not start on what Prometheus holds.
var (
	errNoSeries    = errors.New("no series")
	errFewScrapes  = errors.New("fewer than two scrapes of a caller")
	errPromAtStart = errors.New("reading Prometheus")
)

// checkJudgeable fails (exitFailed) unless Prometheus answers and has
// series of the released service's calls, and refuses (exitUsage) a step
// (--interval) or window (--window) shorter than two scrapes of the
// judged services' callers: a step's calls are counted from a caller's
// samples, and a window that never holds two of them counts none. When
// Prometheus does not say how often it scrapes them, it logs that and
// goes on.
func (r *rollout) checkJudgeable(ctx context.Context, set judgedSet) (int, error) {
	has, err := r.prom.withSeries(ctx, r.f.metric, []string{r.f.service})
	if err != nil {
		return exitFailed, fmt.Errorf("%w: %w", errPromAtStart, err)
	}
	if !has[r.f.service] {
		return exitFailed, fmt.Errorf("%w of %s_count for service %s in Prometheus at %s: are its callers scraped, and do they record otelgraylb's call metrics (--metric names the histogram)?",
			errNoSeries, r.f.metric, r.f.service, r.f.prometheus)
	}
	every, which, err := r.prom.scrapeInterval(ctx, r.f.metric, set.services)
	switch {
	case errors.Is(err, errScrapeUnknown):
		r.logf("%v: make sure --interval and --window are at least twice the scrape interval, or no step can be judged", err)
		return exitOK, nil
	case err != nil:
		return exitFailed, fmt.Errorf("%w: %w", errPromAtStart, err)
	}
	for _, s := range []struct {
		flag string
		d    time.Duration
	}{{"--interval", r.f.interval}, {"--window", r.f.window}} {
		if s.d < 2*every {
			return exitUsage, fmt.Errorf("%s %s: the callers of %s are scraped every %s (%s), so a step's window of %s holds %w and counts no call: set --interval (and --window, when given) to at least %s, or scrape the callers more often",
				s.flag, s.d, strings.Join(set.services, ", "), every, which, s.d, errFewScrapes, 2*every)
		}
	}
	if err := r.f.shadow.checkScrapes(every, which, set.services); err != nil {
		return exitUsage, err
	}
	return exitOK, nil
}

// noCallsNotes says, of each judged service whose gray calls counted none
// in the step, what Prometheus holds of it: no series at all (its callers
// are not scraped), none of gray calls (no call reached a gray instance),
// or gray series that did not grow. Nil when Prometheus does not answer.
func (r *rollout) noCallsNotes(ctx context.Context, set judgedSet, got map[string]kindSamples) map[string]string {
	var none []string
	for _, svc := range set.services {
		if !(got[svc].gray.Requests > 0) {
			none = append(none, svc)
		}
	}
	if len(none) == 0 {
		return nil
	}
	byKind, err := r.prom.seriesByKind(ctx, r.f.metric, none)
	if err != nil {
		return nil
	}
	notes := map[string]string{}
	for _, svc := range none {
		total := 0.0
		for _, n := range byKind[svc] {
			total += n
		}
		switch {
		case total == 0:
			notes[svc] = fmt.Sprintf("no series of %s_count for service %s in Prometheus: are its callers scraped?", r.f.metric, svc)
		case byKind[svc]["gray"] == 0:
			notes[svc] = fmt.Sprintf("Prometheus has %.0f series of %s_count for %s, none of gray calls: no call has reached a gray instance of %s", total, r.f.metric, svc, svc)
		default:
			notes[svc] = fmt.Sprintf("Prometheus has %.0f series of %s's gray calls, which grew by none in the step", byKind[svc]["gray"], svc)
		}
	}
	return notes
}

// registryPlace names where the instances are read.
func (r *rollout) registryPlace() string {
	where := "group " + r.g.group
	if r.g.namespace != "" {
		where += " (namespace " + r.g.namespace + ")"
	}
	return where + " of Nacos at " + r.reg.describe()
}

// changedError: the rules are not those the rollout last wrote (or read,
// before its first step): someone else changed them.
type changedError struct{ from, to graylb.Rules }

func (e *changedError) Error() string {
	return "someone changed the rules: " + describeChange(e.from, e.to)
}

// routingOffNote says why a rollout stops when gray routing is off.
const routingOffNote = "every instance serves every request, so the callers' gray and prod calls no longer tell the builds apart"

// stepTo is a step's write: the canary p, when the rules are those the
// rollout expects (what it wrote last, or read before its first step; the
// canary may already be p, when this is the read-back of its own write).
// Any other change by someone else (closed, enabled, the canary, users,
// addresses, matches) is a changedError and nothing is written: the
// rollout stops, the rules stay as the other writer left them.
func stepTo(p float64, expected graylb.Rules) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		want := cloneRules(expected)
		if r.CanaryPercent == p {
			want.CanaryPercent = p
		}
		if !sameRules(*r, want) {
			return &changedError{from: expected, to: cloneRules(*r)}
		}
		r.CanaryPercent = p
		return nil
	}
}

// checkUnchanged reads the rules: not those the rollout expects, it
// returns what changed. A failed read or a document that does not parse
// is no change (the step's judging goes on; the next write would fail).
func (r *rollout) checkUnchanged(ctx context.Context) *changedError {
	d, err := r.st.get(ctx)
	if err != nil {
		return nil
	}
	rules, err := parseStored(d)
	if err != nil || sameRules(rules, r.expected) {
		return nil
	}
	return &changedError{from: r.expected, to: rules}
}

// changedByOthers ends the rollout (exit 1) on a change by someone else,
// saying what changed; the rules stay as they were left.
func (r *rollout) changedByOthers(ch *changedError, when string) int {
	r.res.Outcome = "failed"
	r.res.Canary, r.res.Closed = ch.to.CanaryPercent, ch.to.Closed
	what := describeChange(ch.from, ch.to)
	switch {
	case ch.to.Closed && !ch.from.Closed:
		r.res.Message = fmt.Sprintf("someone closed the rules %s; stopping, they stay closed in %s (what changed: %s)", when, r.st.describe(), what)
	case ch.to.Enabled != nil && !*ch.to.Enabled:
		r.res.Message = fmt.Sprintf("someone switched gray routing off (enabled: false) %s; stopping: %s; the rules stay as they are in %s (what changed: %s)",
			when, routingOffNote, r.st.describe(), what)
	default:
		r.res.Message = fmt.Sprintf("someone changed the rules %s: %s; stopping, the rules stay as they left them (canary %v%%) in %s",
			when, what, ch.to.CanaryPercent, r.st.describe())
	}
	return exitFailed
}

// closeIfUnchanged is the rollout's rollback: closed, when the rules are
// those the rollout expects; any change by someone else is theirs to keep
// (a changedError, nothing written).
func closeIfUnchanged(expected graylb.Rules) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		want := cloneRules(expected)
		want.Closed = r.Closed
		if !sameRules(*r, want) {
			return &changedError{from: expected, to: cloneRules(*r)}
		}
		r.Closed = true
		return nil
	}
}

// leaseLost ends the rollout (exit 1) when its lease was lost: another
// rollout may be running; the rules are left alone.
func (r *rollout) leaseLost(err error) int {
	r.res.Outcome = "failed"
	r.res.Message = fmt.Sprintf("stopping: %v; the rules are left as they are (canary %v%% as this rollout last wrote) in %s", err, r.res.Canary, r.st.describe())
	return exitFailed
}

// rollback closes the rules, on a context a signal does not cancel: a
// rollback once decided is carried out.
func (r *rollout) rollback(ctx context.Context, why string) int {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*r.g.timeout)
	defer cancel()
	r.logf("gray is worse than prod: %s; rolling back (closed: true)", why)
	_, err := modify(wctx, r.st, false, closeIfUnchanged(r.expected))
	var ch *changedError
	if errors.As(err, &ch) {
		code := r.changedByOthers(ch, "as gray was judged worse than prod")
		r.res.Message += fmt.Sprintf("; gray was worse than prod (%s): close the rules by hand (graylb rollback) unless the change was that", why)
		return code
	}
	if err != nil {
		r.res.Outcome = "failed"
		r.res.Message = fmt.Sprintf("gray is worse than prod (%s) but the rollback failed: %v; the rules stay at canary %v%%: close them by hand (graylb rollback)", why, err, r.res.Canary)
		return exitFailed
	}
	r.res.Outcome, r.res.Closed = "rolled-back", true
	r.res.Message = fmt.Sprintf("rolled back at canary %v%% (the rollout of %s): %s; the rules are closed (closed: true, canary %v%% kept) in %s",
		r.res.Canary, r.f.service, why, r.res.Canary, r.st.describe())
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

// stepWindow is the window a step's check reads: the time since the
// step's write, at most max, at least a second.
func stepWindow(elapsed, max time.Duration) time.Duration {
	w := min(elapsed, max)
	if w < time.Second {
		w = time.Second
	}
	return w
}
