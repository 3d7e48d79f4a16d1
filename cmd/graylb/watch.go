package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/nacos"
)

// registryEvery is how often the rollout reads the judged services'
// instances from the registry between its checks (each check reads them
// too). A process killed and started again at once left r-nacos' list for
// 124 to 416 ms (8 restarts, the list read every 50 ms): a read every
// --poll (15 s) would seldom see it, one every 250 ms about half the time.
const registryEvery = 100 * time.Millisecond

// registryWatch is what the rollout's reads of the registry found of the
// judged services; its reads run beside the checks.
type registryWatch struct {
	mu       sync.Mutex
	services []string     // those read between the checks
	rules    graylb.Rules // the rules the instances are classified under
	svcs     map[string]*watched
	lines    []string // the restarts seen, not yet logged
	err      error    // the last failed read's, not yet logged
}

// watched is what the reads found of one service.
type watched struct {
	// noGrayAt is when a read since the last check found no gray instance
	// of the service taking requests (healthy, enabled, weighted, gray by
	// metadata or address); zero when none did.
	noGrayAt time.Time
	// What the step's fall-backs count (see fallBackEvidence): the count at
	// the last check, those left out (the increments of the checks around
	// a read that found no gray instance), the checks still to leave out,
	// and when that read was.
	fellBackPrev, fellBackOut float64
	leaveOut                  int
	lastNoGray                time.Time
	// known are the addresses listed at any read; absent those not listed
	// at the last one; started their start times (nacos.MetadataStarted)
	// as last read. restarts counts, since the rollout began, by address,
	// each time an address came back after it was absent or was listed
	// with a new start time; grayRestarts and prodRestarts by the
	// instance's kind then.
	known, absent              map[string]bool
	started                    map[string]string
	restarts                   map[string]int
	grayRestarts, prodRestarts int
	// prod is the prod instances the last read listed. list is the last
	// list read, st what classify made of it (read again only when the
	// list changed).
	prod int
	list string
	st   serviceStatus
}

func (w *registryWatch) service(svc string) *watched {
	if w.svcs == nil {
		w.svcs = map[string]*watched{}
	}
	s := w.svcs[svc]
	if s == nil {
		s = &watched{known: map[string]bool{}, absent: map[string]bool{}, started: map[string]string{}, restarts: map[string]int{}}
		w.svcs[svc] = s
	}
	return s
}

// readRegistry reads the instances of services once: whether each has a
// gray instance taking requests, and which of its instances restarted (an
// address listed again after a read that did not list it, or listed with
// a new start time). A failed read changes nothing and is kept for the
// next check to say.
func (r *rollout) readRegistry(ctx context.Context, services []string) {
	for _, svc := range services {
		list, err := r.reg.instances(ctx, svc, r.g.group)
		var st serviceStatus
		key := fmt.Sprint(list)
		if err == nil {
			r.watch.mu.Lock()
			rules := cloneRules(r.watch.rules)
			prev := r.watch.service(svc)
			same, last := prev.list == key && prev.st.Service != "", prev.st
			r.watch.mu.Unlock()
			if same {
				st = last
			} else if st, err = classify(ctx, svc, list, rules, r.g.grayKey, r.g.versionKey); err != nil {
				err = fmt.Errorf("%s: %w", svc, err)
			}
		}
		w := &r.watch
		w.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				w.err = err
			}
			w.mu.Unlock()
			continue
		}
		s := w.service(svc)
		s.list, s.st = key, st
		if st.Gray == 0 {
			s.noGrayAt = time.Now()
		}
		kinds := map[string]string{}
		s.prod = 0
		for _, is := range st.Instances {
			kinds[is.Addr] = is.Kind
			if is.Kind == "prod" {
				s.prod++
			}
		}
		listed := map[string]bool{}
		for _, in := range list {
			addr, now := in.Addr(), in.Metadata[nacos.MetadataStarted]
			listed[addr] = true
			before, back := s.started[addr], s.absent[addr]
			newStart := s.known[addr] && now != "" && before != "" && now != before
			s.known[addr] = true
			delete(s.absent, addr)
			if now != "" {
				s.started[addr] = now
			}
			if !back && !newStart {
				continue
			}
			s.restarts[addr]++
			kind := kinds[addr]
			if kind == "gray" {
				s.grayRestarts++
			} else {
				s.prodRestarts++
			}
			how := "it left the registry and came back"
			switch {
			case newStart && back:
				how = fmt.Sprintf("it left the registry and came back with a new %s: %s, then %s", nacos.MetadataStarted, before, now)
			case newStart:
				how = fmt.Sprintf("%s %s, then %s", nacos.MetadataStarted, before, now)
			}
			w.lines = append(w.lines, fmt.Sprintf("%s: %s instance %s restarted (%s); restarts since the rollout began: gray %d, prod %d",
				svc, kind, addr, how, s.grayRestarts, s.prodRestarts))
		}
		for addr := range s.known {
			if !listed[addr] {
				s.absent[addr] = true
			}
		}
		w.mu.Unlock()
	}
}

// watchRegistry reads the registry every registryEvery, the services of
// the step (see watchServices), until ctx ends; wait waits for its last
// read.
func (r *rollout) watchRegistry(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(registryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			r.watch.mu.Lock()
			services := slices.Clone(r.watch.services)
			r.watch.mu.Unlock()
			rctx, cancel := context.WithTimeout(ctx, r.g.timeout)
			r.readRegistry(rctx, services)
			cancel()
		}
	}()
	return func() { <-done }
}

// watchServices sets the services the reads between the checks read, and
// the rules they classify the instances under.
func (r *rollout) watchServices(services []string, rules graylb.Rules) {
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	r.watch.services, r.watch.rules = slices.Clone(services), cloneRules(rules)
	for _, s := range r.watch.svcs {
		s.list = "" // classified again under the rules
	}
}

// watchStep begins a step: its fall-backs are counted from none.
func (r *rollout) watchStep() {
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	for _, s := range r.watch.svcs {
		s.fellBackPrev, s.fellBackOut = 0, 0
	}
}

// checkRegistry is a check's read of the judged services' instances: it
// logs, after where (the step or the phase), each restart found since the
// last check and a read that failed.
func (r *rollout) checkRegistry(ctx context.Context, services []string, where string) {
	r.readRegistry(ctx, services)
	restarts, err := r.watchNews()
	for _, l := range restarts {
		r.logf("%s: %s", where, l)
	}
	if err != nil && ctx.Err() == nil {
		r.logf("%s: reading the instances from the registry failed (the last reads stand): %v", where, err)
	}
}

// watchNews returns the restarts seen since the last call, a line each,
// and the last read's error, if one failed since.
func (r *rollout) watchNews() ([]string, error) {
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	lines, err := r.watch.lines, r.watch.err
	r.watch.lines, r.watch.err = nil, nil
	return lines, err
}

// evidence is what a check knows of a service beside its calls.
type evidence struct {
	// fellBack are the callers' gray requests that fell back to prod in
	// the step, counted as failed gray calls; skipped are those not
	// counted, and notCounted says why.
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

// fallBackEvidence is what the check at hand makes of svc's fall-backs fb
// (the step's so far): counted as failed gray calls while the rules are
// open, except those around a read of the registry that found no gray
// instance of svc taking requests, whose gray requests fall back for want
// of one, no failure of the build's. Those are the increments since the
// last check of this check and the next (the callers' fall-backs reach
// Prometheus a scrape later).
func (r *rollout) fallBackEvidence(svc string, fb fallBack) evidence {
	e := evidence{ejected: fb.ejected}
	if r.expected.Closed {
		e.skipped, e.notCounted = fb.fellBack, "the rules are closed"
		return e
	}
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	s := r.watch.service(svc)
	inc := fb.fellBack - s.fellBackPrev
	s.fellBackPrev = fb.fellBack
	if !s.noGrayAt.IsZero() {
		s.leaveOut, s.lastNoGray, s.noGrayAt = 2, s.noGrayAt, time.Time{}
	}
	if s.leaveOut > 0 {
		s.fellBackOut += max(inc, 0)
		s.leaveOut--
	}
	e.fellBack = max(fb.fellBack-s.fellBackOut, 0)
	if e.skipped = fb.fellBack - e.fellBack; e.skipped > 0 {
		e.notCounted = fmt.Sprintf("no gray instance of %s took requests in the registry at %s", svc, s.lastNoGray.UTC().Format("15:04:05"))
	}
	return e
}

// text says what the evidence added to a service's reason ("" for
// nothing).
func (e evidence) text() string {
	var parts []string
	switch {
	case e.fellBack > 0 && e.ejected > 0:
		parts = append(parts, fmt.Sprintf("the callers ejected %s: %.0f gray requests fell back to prod in the step, counted as failed gray calls",
			instancesText(e.ejected), e.fellBack))
	case e.fellBack > 0:
		parts = append(parts, fmt.Sprintf("%.0f gray requests fell back to prod in the step (no gray instance ejected), counted as failed gray calls", e.fellBack))
	}
	if e.skipped > 0 {
		parts = append(parts, fmt.Sprintf("%.0f gray requests that fell back to prod not counted as failed: %s", e.skipped, e.notCounted))
	}
	return strings.Join(parts, "; ")
}

// instancesText is the ejected gray instances for a reason.
func instancesText(n float64) string {
	if n == 1 {
		return "1 gray instance (or paused it)"
	}
	return fmt.Sprintf("up to %.0f gray instances at once (or paused them)", n)
}

// withRestarts is e with what svc's restarts since the rollout began make
// of the gray build (see restartEvidence).
func (r *rollout) withRestarts(svc string, e evidence) evidence {
	e.restartsUnhealthy, e.restarts = r.restartEvidence(svc, r.f.restartLimit)
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	if s := r.watch.svcs[svc]; s != nil && s.grayRestarts+s.prodRestarts > 0 {
		e.restartCounts = &restartReport{Gray: s.grayRestarts, Prod: s.prodRestarts}
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
// nodes, a shared dependency, a deployment of prod, the registry): it says
// so, and the gray build is judged on its calls.
func (r *rollout) restartEvidence(svc string, limit int) (unhealthy bool, text string) {
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	s := r.watch.svcs[svc]
	if s == nil || limit <= 0 || s.grayRestarts < limit {
		return false, ""
	}
	var addrs []string
	for addr, n := range s.restarts {
		addrs = append(addrs, fmt.Sprintf("%s: %d", addr, n))
	}
	slices.Sort(addrs)
	if s.prodRestarts > 0 {
		return false, fmt.Sprintf("gray's instances restarted %d times and prod's %d since the rollout began (%s): instances of both builds restart, so something beside the gray build does (the nodes, a shared dependency, a deployment of prod, the registry); not rolled back on restarts",
			s.grayRestarts, s.prodRestarts, strings.Join(addrs, ", "))
	}
	return true, fmt.Sprintf("the gray build restarted %d times since the rollout began (%s), prod's %d instances none: its instances left the registry and came back on their addresses, or came back with a new %s (--restart-limit %d)",
		s.grayRestarts, strings.Join(addrs, ", "), s.prod, nacos.MetadataStarted, limit)
}
