package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/graylb/graylb"
)

const shadowLong = `With --shadow PERCENT, a shadow phase comes before the first step: the rollout sets
shadowPercent (compare-and-set, as it writes the canary), so that the callers mirror that share of
their prod requests (idempotent ones: GET, HEAD, OPTIONS; gRPC methods marked idempotent) to the
gray build, compare its answers with prod's and discard them (package shadow), and judges the gray
build for --shadow-for from the callers' metrics, for every service judged: its answers
(otelgraylb's graylb_shadow_total and graylb_shadow_differences_total: the copies that failed or
whose status differed from prod's, against prod's error ratio and --max-error-increase; those
whose body differed, fields learned as noise left out, against --max-shadow-diff) and its calls
(the call histogram's gray calls, the copies', as a step's: errors and durations). The canary
stays where it was (it must be 0): no user request is sent to gray by it.

  - the gray build worse (the same levels of evidence as a step's, --failure-limit checks in a
    row), or restarted --restart-limit times while prod did not: shadowPercent back to 0, the
    canary never raised, exit 3 with the evidence;
  - healthy at --shadow-for: shadowPercent back to 0, then the steps;
  - no verdict within --max-wait past --shadow-for: shadowPercent back to 0, exit 4.`

// shadowFlags are the rollout's shadow-phase flags.
type shadowFlags struct {
	share   string        // --shadow, as given
	percent float64       // parsed; 0: no shadow phase
	dur     time.Duration // --shadow-for
	maxDiff float64       // --max-shadow-diff
}

func (f *shadowFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.share, "shadow", "", "a shadow phase before the first step: this share of prod requests (10%) mirrored to the gray build and judged; empty or 0: none")
	fs.DurationVar(&f.dur, "shadow-for", 5*time.Minute, "how long the shadow phase lasts before it is judged; at least two scrape intervals of the callers")
	fs.Float64Var(&f.maxDiff, "max-shadow-diff", 0.01, "the share of the gray build's mirrored answers whose body may differ from prod's (0.01: 1 %)")
}

func (f *shadowFlags) check() error {
	if f.share != "" {
		p, err := parsePercent(f.share)
		if err != nil {
			return fmt.Errorf("--shadow: %w", err)
		}
		f.percent = p
	}
	if f.dur <= 0 {
		return fmt.Errorf("--shadow-for %v: must be positive", f.dur)
	}
	if !(f.maxDiff >= 0 && f.maxDiff <= 1) {
		return errors.New("--max-shadow-diff must be within 0-1")
	}
	return nil
}

// checkRules refuses a shadow phase over rules whose canary already sends
// users to gray: the phase judges the gray build before any user reaches
// it.
func (f *shadowFlags) checkRules(rules graylb.Rules) error {
	if f.percent > 0 && rules.CanaryPercent > 0 {
		return fmt.Errorf("--shadow: the canary is at %v%%, users already reach the gray build: a shadow phase comes before any (graylb canary 0 first, or no --shadow)", rules.CanaryPercent)
	}
	return nil
}

// checkScrapes refuses a phase shorter than two scrapes of the callers
// (every, which: their scrape interval and whose, as checkJudgeable reads
// them).
func (f *shadowFlags) checkScrapes(every time.Duration, which string, services []string) error {
	if f.percent > 0 && f.dur < 2*every {
		return fmt.Errorf("--shadow-for %s: the callers of %s are scraped every %s (%s), so the phase holds %w and counts no copy: set it to at least %s",
			f.dur, strings.Join(services, ", "), every, which, errFewScrapes, 2*every)
	}
	return nil
}

// shadowReport is the shadow phase in the rollout's result.
type shadowReport struct {
	Percent   float64               `json:"shadowPercent"`
	For       string                `json:"for"`
	Started   time.Time             `json:"started"`
	Ended     time.Time             `json:"ended"`
	Verdict   string                `json:"verdict"`
	Reason    string                `json:"reason"`
	Services  []shadowServiceReport `json:"services,omitempty"`
	NotJudged map[string]string     `json:"notJudged,omitempty"`
}

// shadowServiceReport is one judged service at the phase's last check.
type shadowServiceReport struct {
	Service string `json:"service"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Copies are what the callers told of the copies; Gray and Prod the
	// calls of each kind as the call histogram counts them (gray's are
	// the copies' and any gray request's).
	Copies *shadowSample `json:"copies,omitempty"`
	Gray   *sample       `json:"gray,omitempty"`
	Prod   *sample       `json:"prod,omitempty"`
}

// shadowPhase runs the shadow phase, when --shadow asks for one: done is
// true when the rollout ends in it, with code; false when the steps
// follow (the shadow share back to 0). Its checks count from its write, at
// most --window or --shadow-for back, whichever is longer.
func (r *rollout) shadowPhase(ctx context.Context, set judgedSet, l *lease, lost <-chan error, nudge func()) (code int, done bool) {
	sf := r.f.shadow
	p := sf.percent
	if p == 0 {
		return exitOK, false
	}
	res, err := modify(ctx, r.st, false, shadowTo(p, r.expected))
	var ch *changedError
	if errors.As(err, &ch) {
		return r.changedByOthers(ch, fmt.Sprintf("before the shadow phase (shadow %v%%) was written", p)), true
	}
	if err != nil {
		if ctx.Err() != nil {
			return r.interrupted(ctx), true
		}
		r.res.Outcome = "failed"
		r.res.Message = fmt.Sprintf("could not set shadow %v%%: %v; the rules are as %s holds them", p, err, r.st.describe())
		return exitFailed, true
	}
	r.expected = res.After
	start := time.Now()
	rep := &shadowReport{Percent: p, For: sf.dur.String(), Started: start, NotJudged: set.notJudged}
	r.res.Shadow = rep
	l.inShadow(p)
	nudge()
	r.logf("shadow phase: shadow %v%% set for %s (canary %v%%); judging the gray build's mirrored calls against prod's: %s", p, sf.dur, r.expected.CanaryPercent, set.describe())
	for _, svc := range slices.Sorted(maps.Keys(set.notJudged)) {
		r.logf("shadow phase: %s: not judged: %s", svc, set.notJudged[svc])
	}
	judges := map[string]*shadowJudge{}
	for _, svc := range set.services {
		judges[svc] = newShadowJudge(r.th, sf.maxDiff)
	}
	end := func() { rep.Ended = time.Now() }
	for {
		select {
		case <-ctx.Done():
			end()
			code := r.interrupted(ctx)
			r.res.Message += fmt.Sprintf(" (in the shadow phase: shadowPercent stays at %v%%)", r.expected.ShadowPercent)
			return code, true
		case err := <-lost:
			end()
			return r.leaseLost(err), true
		case <-time.After(r.f.poll):
		}
		elapsed := time.Since(start)
		if ch := r.checkUnchanged(ctx); ch != nil {
			end()
			return r.changedByOthers(ch, fmt.Sprintf("during the shadow phase (shadow %v%%)", p)), true
		}
		r.checkRegistry(ctx, set.services, "shadow phase")
		window := stepWindow(elapsed, max(r.f.window, sf.dur))
		got, err := r.prom.compare(ctx, queriesFor(r.f.metric, set.services, window), time.Time{})
		var copies map[string]shadowSample
		if err == nil {
			copies, err = r.prom.shadowCounts(ctx, shadowQueriesFor(r.f.metric, set.services, window), time.Time{})
		}
		var v verdict
		var why string
		if err != nil {
			if ctx.Err() != nil {
				continue // the select above reports it
			}
			v, why = verdictWait, err.Error()
		} else {
			v, why, rep.Services = judgeShadowAll(set, judges, got, copies)
		}
		// A build that restarts (a crash loop answers its copies as prod
		// does between crashes) is stopped on its restarts, as in a step.
		if bad := r.restartRollback(set.services); bad != "" && v != verdictUnhealthy {
			v, why = verdictUnhealthy, bad
		}
		rep.Verdict, rep.Reason = v.String(), why
		switch {
		case v == verdictUnhealthy:
			end()
			return r.stopInShadow(ctx, why), true
		case elapsed >= sf.dur && v == verdictHealthy:
			end()
			r.logf("shadow phase: shadow %v%% healthy after %s: %s", p, elapsed.Round(time.Second), why)
			return r.shadowOff(ctx, "after a healthy shadow phase")
		case elapsed >= sf.dur+r.f.maxWait:
			end()
			r.res.Outcome = "no-verdict"
			r.res.Message = fmt.Sprintf("no verdict in the shadow phase (shadow %v%%) within %s (%s): giving up", p, sf.dur+r.f.maxWait, why)
			code, done := r.shadowOff(ctx, "after a shadow phase without a verdict")
			if done {
				return code, true
			}
			r.res.Message += fmt.Sprintf("; shadowPercent set back to 0, the canary left at %v%% in %s", r.expected.CanaryPercent, r.st.describe())
			return exitNoData, true
		case elapsed >= sf.dur:
			r.logf("shadow phase: shadow %v%%: waiting, not advancing blind: %s (%s left of --max-wait)", p, why,
				(sf.dur + r.f.maxWait - elapsed).Round(time.Second))
		default:
			r.logf("shadow phase: shadow %v%%: %s of %s: %s", p, elapsed.Round(time.Second), sf.dur, why)
		}
	}
}

// shadowTo is the shadow phase's write of shadowPercent p, when the rules
// are those the rollout expects (see stepTo): any other change is a
// changedError and nothing is written.
func shadowTo(p float64, expected graylb.Rules) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		want := cloneRules(expected)
		if r.ShadowPercent == p {
			want.ShadowPercent = p
		}
		if !sameRules(*r, want) {
			return &changedError{from: expected, to: cloneRules(*r)}
		}
		r.ShadowPercent = p
		return nil
	}
}

// shadowOff sets shadowPercent back to 0 once the phase is over (when),
// on a context a signal does not cancel: done is false when it was
// written; true, with the exit code, when the rollout ends there.
func (r *rollout) shadowOff(ctx context.Context, when string) (int, bool) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*r.g.timeout)
	defer cancel()
	res, err := modify(wctx, r.st, false, shadowTo(0, r.expected))
	var ch *changedError
	if errors.As(err, &ch) {
		return r.changedByOthers(ch, when), true
	}
	if err != nil {
		r.res.Outcome = "failed"
		r.res.Message = fmt.Sprintf("could not set shadowPercent back to 0 %s: %v; the rules stay at shadow %v%% in %s: set it by hand (graylb rules apply)",
			when, err, r.expected.ShadowPercent, r.st.describe())
		return exitFailed, true
	}
	r.expected = res.After
	r.logf("shadow phase over: shadowPercent back to 0")
	return exitOK, false
}

// stopInShadow ends the rollout when the shadow phase found the gray build
// worse: shadowPercent back to 0, the canary never raised, exit 3.
func (r *rollout) stopInShadow(ctx context.Context, why string) int {
	p := r.expected.ShadowPercent
	r.logf("the gray build is worse than prod in the shadow phase: %s; stopping (shadowPercent back to 0, the canary not raised)", why)
	code, done := r.shadowOff(ctx, "as the gray build was judged worse than prod in the shadow phase")
	if done {
		r.res.Message += fmt.Sprintf("; the gray build was worse than prod in the shadow phase (%s)", why)
		return code
	}
	r.res.Outcome = "rolled-back"
	r.res.Message = fmt.Sprintf("stopped in the shadow phase (shadow %v%%, the rollout of %s): %s; the rules are back to shadowPercent 0 with the canary never raised (canary %v%%) in %s",
		p, r.f.service, why, r.expected.CanaryPercent, r.st.describe())
	r.res.Next = "fix the gray build, then run the rollout again; no user request reached it through the canary"
	return exitRollback
}

// shadowJudge judges one service's checks in the shadow phase: the copies'
// calls as a step's (stepJudge over the call histogram, whose gray calls
// are the copies'), and their answers (judgeAnswers), each counting its
// own checks in a row. The zero shadowJudge is not usable: see
// newShadowJudge.
type shadowJudge struct {
	th      thresholds
	maxDiff float64
	calls   *stepJudge
	streak  int
}

func newShadowJudge(th thresholds, maxDiff float64) *shadowJudge {
	j := &shadowJudge{th: th, maxDiff: maxDiff, calls: newStepJudge(th)}
	j.th.FailureLimit = j.calls.th.FailureLimit
	return j
}

// check judges one poll's samples, each from the phase's start:
// unhealthy when the answers or the calls are, else worse when one is,
// else wait when one waits, else healthy.
func (j *shadowJudge) check(calls kindSamples, copies shadowSample) (verdict, string) {
	va, wa := judgeAnswers(copies, calls.prod, j.th, j.maxDiff)
	switch va {
	case verdictWorse:
		j.streak++
		if j.streak >= j.th.FailureLimit {
			va = verdictUnhealthy
		} else {
			wa = fmt.Sprintf("%s (check %d of %d in a row before it is stopped)", wa, j.streak, j.th.FailureLimit)
		}
	case verdictUnhealthy:
		j.streak++
	default:
		j.streak = 0
	}
	vc, wc := j.calls.check(calls.gray, calls.prod)
	switch {
	case va == verdictUnhealthy:
		return va, "answers: " + wa
	case vc == verdictUnhealthy:
		return vc, "calls: " + wc
	}
	v := va
	if rank(vc) > rank(v) {
		v = vc
	}
	return v, "answers: " + wa + "; calls: " + wc
}

// judgeAnswers judges the gray build's mirrored answers in one check
// (copies, from the phase's start; prod, prod's calls from the histogram):
// two tests, each at the levels of a step's (pWorse and pBeyondDoubt over
// the two): the copies that failed or whose status differed from the
// primary's, against prod's error ratio and MaxErrorIncrease (a status
// that differs counts against gray whichever side failed); and those
// whose body differed (noise left out by the mirror), against maxDiff.
// verdictWait with fewer than MinRequests copies compared.
func judgeAnswers(copies shadowSample, prod sample, th thresholds, maxDiff float64) (verdict, string) {
	n := copies.Compared()
	if !(n >= th.MinRequests) || n == 0 || math.IsInf(n, 0) {
		return verdictWait, fmt.Sprintf("the gray build answered %.0f mirrored calls in the phase, at least %.0f needed to judge", finite(n), th.MinRequests)
	}
	errs := math.Min(copies.Failed+copies.ByStatus, n)
	body := math.Min(copies.ByBody, n)
	prodBase := prod.Requests >= th.MinRequests && prod.Requests > 0 && !math.IsInf(prod.Requests, 0)
	np, pe := 0.0, 0.0
	if prodBase {
		np, pe = prod.Requests, math.Min(finite(prod.Errors), prod.Requests)
	}
	pErr := moreErrorsTest(errs, n, pe, np, th.MaxErrorIncrease)
	pBody := moreErrorsTest(body, n, 0, 0, maxDiff)
	errText := fmt.Sprintf("%.2f%% of the gray build's %.0f mirrored answers failed or differed from prod's by status (%.0f failed, %.0f by status) vs prod's error ratio %.2f%%%s, allowed %.2f points more (p = %s)",
		100*errs/n, n, copies.Failed, copies.ByStatus, ratioOf(prodBase, prod)*100, baseNote(prodBase, prod), th.MaxErrorIncrease*100, pText(pErr))
	bodyText := fmt.Sprintf("%.2f%% of the gray build's %.0f mirrored answers differed from prod's by body (%.0f; fields that differ between prod answers left out), allowed %.2f%% (p = %s)",
		100*body/n, n, body, maxDiff*100, pText(pBody))
	worst, why := pErr, errText
	if pBody < worst {
		worst, why = pBody, bodyText
	}
	switch {
	case worst < pBeyondDoubt/2:
		return verdictUnhealthy, why
	case worst < pWorse/2:
		return verdictWorse, why
	}
	return verdictHealthy, fmt.Sprintf("no evidence the gray build answers worse: %.0f mirrored answers, %.2f%% failed or differed by status (prod's error ratio %.2f%%%s), %.2f%% by body (allowed %.2f%%), %.0f by latency, %.0f copies dropped, %.0f writes blocked",
		n, 100*errs/n, ratioOf(prodBase, prod)*100, baseNote(prodBase, prod), 100*body/n, maxDiff*100, copies.ByLatency, copies.Dropped, copies.BlockedWrites)
}

// judgeShadowAll judges one check of every judged service and returns the
// phase's verdict (as judgeAll: the worst service's) and each service's
// report. A service of which the callers told no copy gets a note.
func judgeShadowAll(set judgedSet, judges map[string]*shadowJudge, got map[string]kindSamples, copies map[string]shadowSample) (verdict, string, []shadowServiceReport) {
	overall := verdictHealthy
	var parts, bad []string
	reports := make([]shadowServiceReport, 0, len(set.services))
	for _, svc := range set.services {
		k, c := got[svc], copies[svc]
		v, why := judges[svc].check(k, c)
		if _, ok := copies[svc]; !ok {
			why += fmt.Sprintf("; Prometheus has no series of %s for %s in the phase: do its callers install otelgraylb.ShadowObserver (shadow.WithObserver), and mirror (httpctx's Transport; grpcctx with grpcctx.Idempotent)?", metricShadow, svc)
		}
		gray, prod := k.gray, k.prod
		reports = append(reports, shadowServiceReport{Service: svc, Verdict: v.String(), Reason: why, Copies: &c, Gray: &gray, Prod: &prod})
		parts = append(parts, svc+": "+v.String()+": "+why)
		if v == verdictUnhealthy {
			bad = append(bad, svc+": "+why)
		}
		if rank(v) > rank(overall) {
			overall = v
		}
	}
	if overall == verdictUnhealthy {
		return overall, strings.Join(bad, "; "), reports
	}
	return overall, strings.Join(parts, "; "), reports
}
