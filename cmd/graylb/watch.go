package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/graylb/graylb/nacos"
)

// watched is what the rollout's reads of the registry found of one judged
// service.
type watched struct {
	// noGray is when a read in the current step found no gray instance of
	// the service taking requests (healthy, enabled, weighted, gray by
	// metadata or address), zero while every read of the step found one.
	noGray time.Time
	// started is each address's start time (nacos.MetadataStarted) as last
	// read, kept while the address is not listed; restarts counts, since
	// the rollout began, the new start times read on each address, and
	// grayRestarts and prodRestarts those of each kind (the instance's kind
	// at the read that saw it).
	started                    map[string]string
	restarts                   map[string]int
	grayRestarts, prodRestarts int
	// gray and prod are the instances of each kind the last read listed.
	gray, prod int
}

// watchStep begins a step's watch: what the reads of the last step found
// of the gray instances is forgotten.
func (r *rollout) watchStep() {
	for _, w := range r.watch {
		w.noGray = time.Time{}
	}
}

// readRegistry reads the instances of services from the registry, as a
// check begins (and once before the first step): whether each service has
// a gray instance taking requests, and its instances' start times. It
// returns a line for each restart it saw (an address listed again with a
// new start time). A failed read changes nothing (the last reads stand)
// and is returned, the services' errors joined.
func (r *rollout) readRegistry(ctx context.Context, services []string) ([]string, error) {
	if r.watch == nil {
		r.watch = map[string]*watched{}
	}
	var errs []error
	var seen []string
	for _, svc := range services {
		w := r.watch[svc]
		if w == nil {
			w = &watched{started: map[string]string{}, restarts: map[string]int{}}
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
		kinds := map[string]string{}
		w.gray, w.prod = 0, 0
		for _, is := range st.Instances {
			kinds[is.Addr] = is.Kind
			switch is.Kind {
			case "gray":
				w.gray++
			case "prod":
				w.prod++
			}
		}
		for _, in := range list {
			addr, now := in.Addr(), in.Metadata[nacos.MetadataStarted]
			if now == "" {
				continue // registered by a client that does not say (a Java service)
			}
			before, known := w.started[addr]
			w.started[addr] = now
			if !known || before == now {
				continue
			}
			w.restarts[addr]++
			kind := kinds[addr]
			if kind == "gray" {
				w.grayRestarts++
			} else {
				w.prodRestarts++
			}
			seen = append(seen, fmt.Sprintf("%s: %s instance %s restarted (%s %s, then %s); restarts since the rollout began: gray %d, prod %d",
				svc, kind, addr, nacos.MetadataStarted, before, now, w.grayRestarts, w.prodRestarts))
		}
	}
	return seen, errors.Join(errs...)
}

// withRestarts is e with what svc's restarts since the rollout began make
// of the gray build (see restartEvidence).
func (r *rollout) withRestarts(svc string, e evidence) evidence {
	e.restartsUnhealthy, e.restarts = r.restartEvidence(svc, r.f.restartLimit)
	if w := r.watch[svc]; w != nil && w.grayRestarts+w.prodRestarts > 0 {
		e.restartCounts = &restartReport{Gray: w.grayRestarts, Prod: w.prodRestarts}
	}
	return e
}

// restartRollback is why services' restarts roll the step back, "" when
// they do not: the verdict of a check whose calls could not be read.
func (r *rollout) restartRollback(services []string) string {
	var bad []string
	for _, svc := range services {
		if e := r.withRestarts(svc, evidence{}); e.restartsUnhealthy {
			bad = append(bad, svc+": "+e.restarts)
		}
	}
	return strings.Join(bad, "; ")
}

// restartEvidence says what svc's restarts since the rollout began make
// of the gray build, with --restart-limit limit (0: off): unhealthy when
// its instances restarted limit times or more and prod's did not; when
// prod's restarted too, something beside the gray build restarts them (the
// nodes, a shared dependency, a deployment of prod): it says so, and the
// gray build is judged on its calls.
func (r *rollout) restartEvidence(svc string, limit int) (unhealthy bool, text string) {
	w := r.watch[svc]
	if w == nil || limit <= 0 || w.grayRestarts < limit {
		return false, ""
	}
	var addrs []string
	for addr, n := range w.restarts {
		addrs = append(addrs, fmt.Sprintf("%s: %d", addr, n))
	}
	slices.Sort(addrs)
	if w.prodRestarts > 0 {
		return false, fmt.Sprintf("gray's instances restarted %d times and prod's %d since the rollout began (%s): instances of both builds restart, so something beside the gray build does (the nodes, a shared dependency, a deployment of prod); not rolled back on restarts",
			w.grayRestarts, w.prodRestarts, strings.Join(addrs, ", "))
	}
	return true, fmt.Sprintf("the gray build restarted %d times since the rollout began (%s; registered again on its address with a new %s), prod's %d instances none (--restart-limit %d)",
		w.grayRestarts, strings.Join(addrs, ", "), nacos.MetadataStarted, w.prod, limit)
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
	// restarts says what the gray build's restarts make of it (see
	// restartEvidence): restartsUnhealthy rolls it back.
	restarts          string
	restartsUnhealthy bool
	restartCounts     *restartReport // nil: none seen
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
