package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// watched is what the rollout's reads of the registry found of one judged
// service.
type watched struct {
	// noGray is when a read in the current step found no gray instance of
	// the service taking requests (healthy, enabled, weighted, gray by
	// metadata or address), zero while every read of the step found one.
	noGray time.Time
}

// watchStep begins a step's watch: what the reads of the last step found
// of the gray instances is forgotten.
func (r *rollout) watchStep() {
	for _, w := range r.watch {
		w.noGray = time.Time{}
	}
}

// readRegistry reads the instances of services from the registry, as a
// check begins. A failed read changes nothing (the last reads stand) and
// is returned, the services' errors joined.
func (r *rollout) readRegistry(ctx context.Context, services []string) error {
	if r.watch == nil {
		r.watch = map[string]*watched{}
	}
	var errs []error
	for _, svc := range services {
		w := r.watch[svc]
		if w == nil {
			w = &watched{}
			r.watch[svc] = w
		}
		list, err := r.reg.instances(ctx, svc, r.g.group)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st, err := classify(ctx, svc, list, r.expected, r.g.grayKey, r.g.versionKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", svc, err))
			continue
		}
		if st.Gray == 0 && w.noGray.IsZero() {
			w.noGray = time.Now()
		}
	}
	return errors.Join(errs...)
}

// evidence is what a check knows of a service beside its calls.
type evidence struct {
	// fellBack are the callers' gray requests that fell back to prod in
	// the step, counted as failed gray calls; notCounted says why they are
	// not (then fellBack is 0 and skipped holds them).
	fellBack, skipped float64
	notCounted        string
	// ejected is the most gray instances one caller had ejected (or
	// paused) at once in the step.
	ejected float64
}

// fallBackEvidence is what the check at hand makes of svc's fall-backs fb:
// counted as failed gray calls while the rules are open and every read of
// the registry in the step found a gray instance of svc taking requests
// (a gray request falls back to prod, too, when the rules are closed or
// the service has no gray instance: no failure of the gray build's).
func (r *rollout) fallBackEvidence(svc string, fb fallBack) evidence {
	e := evidence{ejected: fb.ejected}
	w := r.watch[svc]
	switch {
	case r.expected.Closed:
		e.skipped, e.notCounted = fb.fellBack, "the rules are closed"
	case w != nil && !w.noGray.IsZero():
		e.skipped = fb.fellBack
		e.notCounted = fmt.Sprintf("no gray instance of %s took requests in the registry at %s", svc, w.noGray.UTC().Format("15:04:05"))
	default:
		e.fellBack = fb.fellBack
	}
	return e
}

// text says what the evidence added to a service's reason ("" for
// nothing).
func (e evidence) text() string {
	switch {
	case e.fellBack > 0 && e.ejected > 0:
		return fmt.Sprintf("the callers ejected %s: %.0f gray requests fell back to prod in the step, counted as failed gray calls",
			instancesText(e.ejected), e.fellBack)
	case e.fellBack > 0:
		return fmt.Sprintf("%.0f gray requests fell back to prod in the step (no gray instance ejected), counted as failed gray calls", e.fellBack)
	case e.skipped > 0:
		return fmt.Sprintf("%.0f gray requests fell back to prod in the step, not counted as failed: %s", e.skipped, e.notCounted)
	}
	return ""
}

// instancesText is the ejected gray instances for a reason.
func instancesText(n float64) string {
	if n == 1 {
		return "1 gray instance (or paused it)"
	}
	return fmt.Sprintf("up to %.0f gray instances at once (or paused them)", n)
}
