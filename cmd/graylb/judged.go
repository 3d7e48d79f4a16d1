package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/graylb/graylb"
)

// serviceReport is one judged service at the last check of a step.
type serviceReport struct {
	Service string `json:"service"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Gray counts, beside the gray calls, the callers' gray requests that
	// fell back to prod (GrayFellBack), as failed calls.
	Gray *sample `json:"gray,omitempty"`
	Prod *sample `json:"prod,omitempty"`
	// GrayFellBack: the callers' gray requests that fell back to prod in
	// the step, counted in Gray; GrayFellBackNotCounted says why they were
	// not, when they were not. GrayEjectedMax: the most gray instances a
	// caller had ejected (or paused) at once in the step.
	GrayFellBack           float64 `json:"grayFellBack,omitempty"`
	GrayFellBackNotCounted string  `json:"grayFellBackNotCounted,omitempty"`
	GrayEjectedMax         float64 `json:"grayEjectedMax,omitempty"`
	// Restarts: what the registry showed of its instances' restarts since
	// the rollout began (by the start time nacos.Register writes).
	Restarts *restartReport `json:"restarts,omitempty"`
}

// restartReport counts a service's restarts since the rollout began.
type restartReport struct {
	Gray int `json:"gray"`
	Prod int `json:"prod"`
}

// judgedSet is what a step judges: the released service and every other
// service whose gray instances take requests, which the canary's share
// reaches (it draws requests, not services: a request drawn gray goes to
// the gray instances of every service on its way).
type judgedSet struct {
	services []string // the released service first, then the others sorted
	// notJudged says why services with gray instances are not judged.
	notJudged map[string]string
}

// discover reads the registry (the services of the group and their
// instances, classified under rules as status does) and which of the
// services with gray instances that take requests Prometheus has call
// series of. A service none of whose calls is scraped (nobody calls it
// through graylb with the call metrics; its gray instances may only
// consume records) cannot be judged: it is left out, and said so. The
// released service is always judged. With Prometheus unreachable every
// service with gray instances is judged (the checks say what is missing).
func (r *rollout) discover(ctx context.Context, rules graylb.Rules) (judgedSet, error) {
	set := judgedSet{services: []string{r.f.service}, notJudged: map[string]string{}}
	names, total, err := r.reg.services(ctx, r.g.group)
	if err != nil {
		return set, err
	}
	if total > len(names) {
		return set, fmt.Errorf("%d services are registered in %s, more than the %d a rollout reads: the services with gray instances among the others would take the canary's share unjudged",
			total, r.registryPlace(), len(names))
	}
	var gray []string
	for _, svc := range slices.Sorted(slices.Values(names)) {
		if svc == r.f.service || graylb.ValidateServiceName(svc) != nil {
			continue
		}
		list, err := r.reg.instances(ctx, svc, r.g.group)
		if err != nil {
			return set, err
		}
		s, err := classify(ctx, svc, list, rules, r.g.grayKey, r.g.versionKey)
		if err != nil {
			return set, fmt.Errorf("%s: %w", svc, err)
		}
		if s.Gray > 0 {
			gray = append(gray, svc)
		}
	}
	if len(gray) == 0 {
		return set, nil
	}
	scraped, err := r.prom.withSeries(ctx, r.f.metric, gray)
	for _, svc := range gray {
		if err == nil && !scraped[svc] {
			set.notJudged[svc] = fmt.Sprintf("it has gray instances but Prometheus has no series of %s_count for it: no caller's calls to it are scraped (a service whose instances only consume records makes none)", r.f.metric)
			continue
		}
		set.services = append(set.services, svc)
	}
	return set, nil
}

// describe is the set for the log.
func (s judgedSet) describe() string {
	return strings.Join(s.services, ", ")
}

// judgeAll judges one check of every judged service (judges by service;
// got are the samples read; ev what else the check knows of a service:
// the gray requests that fell back to prod, counted in gray's calls as
// failed ones; notes add to a service's reason) and returns the step's
// verdict: unhealthy when one service is (its reason), else worse when one
// is, else wait when one has too few calls, else healthy; and each
// service's report.
func judgeAll(set judgedSet, judges map[string]*stepJudge, got map[string]kindSamples, ev map[string]evidence, notes map[string]string) (verdict, string, []serviceReport) {
	overall := verdictHealthy
	var parts, bad []string
	reports := make([]serviceReport, 0, len(set.services))
	for _, svc := range set.services {
		k, e := got[svc], ev[svc]
		if e.fellBack > 0 {
			k.gray.Requests += e.fellBack
			k.gray.Errors += e.fellBack
		}
		v, why := judges[svc].check(k.gray, k.prod)
		if t := e.text(); t != "" {
			why += "; " + t
		}
		switch {
		case e.restartsUnhealthy:
			v, why = verdictUnhealthy, e.restarts+"; "+why
		case e.restarts != "":
			why += "; " + e.restarts
		}
		if n := notes[svc]; n != "" {
			why += "; " + n
		}
		gray, prod := k.gray, k.prod
		reports = append(reports, serviceReport{Service: svc, Verdict: v.String(), Reason: why, Gray: &gray, Prod: &prod,
			GrayFellBack: e.fellBack, GrayFellBackNotCounted: e.notCounted, GrayEjectedMax: e.ejected, Restarts: e.restartCounts})
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

// rank orders verdicts by how far they keep a step from healthy.
func rank(v verdict) int {
	switch v {
	case verdictHealthy:
		return 0
	case verdictWait:
		return 1
	case verdictWorse:
		return 2
	default:
		return 3
	}
}
