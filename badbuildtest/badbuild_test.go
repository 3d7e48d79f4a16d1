package badbuildtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBadBuilds runs the plan (see plan): for each run, fresh processes —
// two prod instances, the gray build's instance(s), a caller, Prometheus
// scraping it — and graylb rollout of the service; then it checks the
// targets and writes the table (GRAYLB_RELIABILITY_OUT: badbuilds.md).
func TestBadBuilds(t *testing.T) {
	addr := nacosAddr(t)
	need(t, "prometheus")
	bins := buildPrograms(t)
	var rows []string
	used := map[string]bool{}
	for _, p := range plan() {
		name := p.build.fault
		if name == "" {
			name = "healthy"
		}
		var results []result
		t.Run(fmt.Sprintf("%s-%dgray", name, p.grays), func(t *testing.T) {
			for i := range p.runs {
				r := result{exit: -1}
				t.Run(strconv.Itoa(i+1), func(t *testing.T) { r = runOnce(t, bins, addr, p.build, p.grays) })
				if r.exit < 0 {
					continue // not run, or broke (a process, the server): no figures
				}
				results = append(results, r)
			}
			if len(results) > 0 {
				rows = append(rows, row(t, p, results, used))
			}
		})
	}
	text := tableHeader + strings.Join(rows, "\n") + "\n"
	if len(used) > 0 {
		text += "\nKnown misses (the code of the day; the test reports them and does not fail on them):\n"
		for _, k := range slices.Sorted(maps.Keys(used)) {
			text += "- " + k + ": " + knownReasons[k] + ".\n"
		}
	}
	reliabilityFragment(t, "badbuilds", text)
}

// counts mirror the caller's /report (examples/rollout).
type counts struct {
	Sent         int `json:"sent"`
	Failed       int `json:"failed"`
	ServedByGray int `json:"servedByGray"`
	ServedByProd int `json:"servedByProd"`
	ProdOnGray   int `json:"prodOnGray"`
}

type report struct {
	From      time.Time      `json:"from"`
	To        time.Time      `json:"to"`
	Gray      counts         `json:"gray"`
	Unmarked  counts         `json:"unmarked"`
	Failures  map[string]int `json:"failures"`
	Instances struct {
		Prod, Gray, EjectedProd, EjectedGray int
	} `json:"instances"`
	Rules struct {
		CanaryPercent float64 `json:"canaryPercent"`
		Closed        bool    `json:"closed"`
	} `json:"rules"`
	GrayEjections map[string]int `json:"grayEjections"`
	Shadow        map[string]int `json:"shadow"` // the caller's shadow events by outcome
}

// result is what one run measured.
type result struct {
	exit       int // graylb rollout's exit status; -1: the run did not get there
	rep        report
	prodOnGray int  // prod requests the gray instances logged
	restarts   int  // of the gray instances (the crash loop)
	checks     int  // the rollout's checks in all
	enough     int  // of them, in the deciding (last) step, with enough gray calls to judge
	onRestarts bool // rolled back on the gray build's restarts
	// afterRestarts: of the checks, those from the one that saw the gray
	// build's restartLimit-th restart on (0: it restarted fewer times)
	afterRestarts int
	// afterFirstRestart: those from the one that saw its first restart on
	// (0: none seen): a build that answers well until it crashes has no
	// evidence against it before
	afterFirstRestart int
	judged            string        // what the judge's last check saw, from the rollout's JSON
	rollback          string        // why it rolled back, as it said
	evidence          evidence      // what the callers' metrics showed while the rollout ran
	took              time.Duration // the rollout's
}

// runOnce runs build once with grays gray instances.
func runOnce(t *testing.T, bins programs, addr string, b build, grays int) result {
	res := result{exit: -1}
	svc := fmt.Sprintf("badbuild-%s-%d", strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()[len("TestBadBuilds/"):])), time.Now().UnixNano()%1e6)
	rules := svc + ".rules.json"
	publishRules(t, addr, rules, "{}")
	// Each process gets a cache folder of its own for the Nacos SDK.
	env := func() []string { return []string{"XDG_CACHE_HOME=" + t.TempDir(), "GRAYLB_NACOS_ADDR=" + addr} }
	registered := regexp.MustCompile(`(?m)^registered \S+ at (\S+)`)
	var prods []*proc
	for i := range 2 {
		prods = append(prods, startProc(t, fmt.Sprintf("prod %d", i+1), bins.rollout, env(), "instance", "-service", svc))
	}
	caller := startProc(t, "caller", bins.rollout, env(), "caller", "-service", svc, "-rules", rules, "-listen", "127.0.0.1:0")
	callerAddr := caller.waitLine(t, regexp.MustCompile(`/report on http://(\S+)`), 60*time.Second)[1]
	for _, p := range prods {
		p.waitLine(t, registered, 60*time.Second)
	}
	prom := startPrometheus(t, callerAddr)
	get := func(from, to time.Time) report {
		t.Helper()
		var r report
		u := fmt.Sprintf("http://%s/report?from=%d&to=%d", callerAddr, from.UnixMilli(), to.UnixMilli())
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("the caller's report: %v\n%s", err, caller.out)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatalf("the caller's report: %v", err)
		}
		return r
	}
	waitFor(t, 30*time.Second, "the caller routes to both prod instances", func() bool {
		r := get(time.Now(), time.Now())
		return r.Instances.Prod+r.Instances.EjectedProd == 2
	})
	waitFor(t, 30*time.Second, "Prometheus scraped the caller", func() bool { return scraped(prom, 1) })

	// The gray build: its instances start together; a crash-looping one is
	// started again on its port each time it exits, as an orchestrator does.
	g := &grayBuild{t: t, bin: bins.rollout, env: env, svc: svc, fault: b.fault}
	for range grays {
		g.start(freePort(t))
	}
	for _, in := range g.current() {
		in.waitLine(t, registered, 60*time.Second)
	}
	t0 := time.Now()
	waitFor(t, 15*time.Second, "the caller lists the gray instances", func() bool {
		r := get(time.Now(), time.Now())
		return r.Instances.Gray+r.Instances.EjectedGray == grays
	})

	code, stdout, stderr, took := rollout(t, bins.graylb, addr, svc, rules, prom)
	var err error
	res.exit, res.took = code, took
	res.checks, res.enough = checks(stderr, code)
	res.afterRestarts = checksAfterRestarts(stderr, restartLimit)
	res.afterFirstRestart = checksAfterRestarts(stderr, 1)
	res.judged = judged(stdout)
	if m := rolledBack.FindStringSubmatch(stderr); m != nil {
		res.rollback = m[1]
		res.onRestarts = strings.Contains(res.rollback, onRestarts)
	}
	if res.evidence, err = callersEvidence(prom, svc, took); err != nil {
		t.Errorf("reading the callers' metrics: %v", err)
	}
	if wait := time.Until(t0.Add(minPhase)); wait > 0 {
		<-time.After(wait) // the measured window's end, not a guess at how long something takes
	}
	end := time.Now()
	res.rep = get(t0.Add(measureFrom), end)
	g.stop()
	res.prodOnGray, res.restarts = g.prodRequests(), g.restarts()
	for _, p := range append(prods, caller) {
		p.kill()
	}
	t.Logf("%s with %d gray: graylb rollout exit %d after %s, %d checks (%d with enough gray calls in the last step); last check %s; the callers' metrics over the rollout: %s\n%s%s",
		b.what, grays, code, took.Round(time.Millisecond), res.checks, res.enough, res.judged, res.evidence, stderr, stdout)
	t.Logf("from %s after the gray build registered until %s: QA %+v, unmarked %+v, failures %v; gray ejections %v; prod requests on gray %d; gray restarts %d",
		measureFrom, end.Sub(t0).Round(time.Second), res.rep.Gray, res.rep.Unmarked, res.rep.Failures, res.rep.GrayEjections, res.prodOnGray, res.restarts)
	if t.Failed() {
		t.Logf("caller:\n%s", caller.out)
	}
	return res
}

// rollout runs graylb rollout of svc (the rules in Nacos config rules)
// and returns its exit status, its output and how long it took.
func rollout(t *testing.T, bin, addr, svc, rules, prom string) (int, string, string, time.Duration) {
	t.Helper()
	return rolloutUntil(t, bin, addr, svc, rules, prom, rolloutFlags, nil)
}

// rolloutUntil is rollout with flags; when stop is given, the rollout is
// sent SIGTERM as soon as a line of its log matches it.
func rolloutUntil(t *testing.T, bin, addr, svc, rules, prom string, flags []string, stop *regexp.Regexp) (int, string, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"rollout", "--service", svc, "--prometheus", prom, "--nacos", addr, "--data-id", rules, "--output", "json"}, flags...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	errOut := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &out, errOut
	if stop != nil {
		cmd.Stderr = &signalOn{w: errOut, re: stop, cmd: cmd}
	}
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String(), took
}

// restartLimit is graylb rollout's --restart-limit at its default: the
// gray build's restarts since the rollout began that roll it back; a
// rollback on them says onRestarts.
const (
	restartLimit = 2
	onRestarts   = "the gray build restarted"
)

var (
	restartSeen = regexp.MustCompile(`restarts since the rollout began: gray (\d+), prod \d+$`)
	stepSet     = regexp.MustCompile(`: canary [0-9.]+% set(;|$)`) // "step 2/2: canary 50% set; judging svc"
	// A check's line: "step 1/2: canary 10%: 3s of 10s: <service>: wait: ...",
	// or a step's last ("canary 10% healthy after 10s: ...", "waiting, not
	// advancing blind: ..."). The rollout names the service judged since it
	// judges every service with gray instances; a pattern without the name
	// counted none of the checks before a step's end.
	stepCheck  = regexp.MustCompile(`step \d+/\d+: canary [0-9.]+%(: \S+ of \S+: (\S+: )?(wait|healthy|worse): | healthy after |: waiting, not advancing blind: )`)
	rolledBack = regexp.MustCompile(`gray is worse than prod: (.*); rolling back`)
	notEnough  = regexp.MustCompile(`calls in the step, at least \d+ needed to judge|prometheus unreachable`)
)

// checks reads the rollout's progress: its checks in all and, in its last
// step (the one that decided), those with enough gray calls to judge. A
// rollout that gave up (exit 4) made one more check than it printed.
func checks(stderr string, code int) (all, enough int) {
	for _, l := range strings.Split(stderr, "\n") {
		switch {
		case stepSet.MatchString(l):
			enough = 0
		case stepCheck.MatchString(l) || rolledBack.MatchString(l):
			all++
			if !notEnough.MatchString(l) {
				enough++
			}
		}
	}
	if code == 4 {
		all++
	}
	return all, enough
}

// checksAfterRestarts counts the rollout's checks from the one that saw
// the gray build's limit-th restart on (it logs each restart as the
// check's read of the registry finds it, before the check's verdict); 0
// when it saw fewer.
func checksAfterRestarts(stderr string, limit int) int {
	n, seen := 0, false
	for _, l := range strings.Split(stderr, "\n") {
		if m := restartSeen.FindStringSubmatch(l); m != nil {
			if k, _ := strconv.Atoi(m[1]); k >= limit {
				seen = true
			}
		}
		if seen && (stepCheck.MatchString(l) || rolledBack.MatchString(l)) {
			n++
		}
	}
	return n
}

// judged reads the rollout's JSON result: the calls of each kind its last
// check counted in the last step (gray's with the gray requests that fell
// back to prod, counted as failed calls).
func judged(stdout string) string {
	var res struct {
		Steps []struct {
			Canary     float64 `json:"canaryPercent"`
			Gray, Prod *struct {
				Requests float64 `json:"requests"`
				Errors   float64 `json:"errors"`
			}
			Services []struct {
				FellBack float64 `json:"grayFellBack"`
			} `json:"services"`
		} `json:"steps"`
	}
	if json.Unmarshal([]byte(stdout), &res) != nil || len(res.Steps) == 0 {
		return ""
	}
	s := res.Steps[len(res.Steps)-1]
	if s.Gray == nil || s.Prod == nil {
		return fmt.Sprintf("at canary %v %%, no sample", s.Canary)
	}
	fell := ""
	if len(s.Services) > 0 && s.Services[0].FellBack > 0 {
		fell = fmt.Sprintf(", %.0f of them gray requests that fell back to prod", s.Services[0].FellBack)
	}
	return fmt.Sprintf("gray %.0f calls (%.0f failed%s), prod %.0f (%.0f), at canary %v %%", s.Gray.Requests, s.Gray.Errors, fell, s.Prod.Requests, s.Prod.Errors, s.Canary)
}

// grayBuild is the gray build's instances of a run.
type grayBuild struct {
	t     *testing.T
	bin   string
	env   func() []string
	svc   string
	fault string

	mu      sync.Mutex
	procs   []*proc // every process started, restarts included
	live    []*proc // the current one of each instance
	stopped bool
	wg      sync.WaitGroup
}

// start starts an instance on port, and again each time it exits until
// stop.
func (g *grayBuild) start(port int) {
	args := []string{"instance", "-service", g.svc, "-gray", "-fault", g.fault, "-port", strconv.Itoa(port)}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := startProc(g.t, fmt.Sprintf("gray :%d", port), g.bin, g.env(), args...)
	g.procs = append(g.procs, p)
	i := len(g.live)
	g.live = append(g.live, p)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			<-p.exited
			g.mu.Lock()
			if g.stopped {
				g.mu.Unlock()
				return
			}
			p = startProc(g.t, fmt.Sprintf("gray :%d", port), g.bin, g.env(), args...)
			g.procs = append(g.procs, p)
			g.live[i] = p
			g.mu.Unlock()
		}
	}()
}

func (g *grayBuild) current() []*proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.live)
}

// stop kills every instance and starts none again.
func (g *grayBuild) stop() {
	g.mu.Lock()
	g.stopped = true
	live := slices.Clone(g.live)
	g.mu.Unlock()
	for _, p := range live {
		p.kill()
	}
	g.wg.Wait()
}

// prodRequests counts the prod requests the instances logged.
func (g *grayBuild) prodRequests() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, p := range g.procs {
		n += count(p.out.String(), "prod request on a gray instance")
	}
	return n
}

func (g *grayBuild) restarts() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.procs) - len(g.live)
}

const tableHeader = "| gray build | gray instances | runs | QA requests (`gray: true`) failed from 5 s on | unmarked requests failed from 5 s on | prod requests on gray | the caller's ejections of gray | the callers' metrics while the rollout ran | the rollout | checks in all (with enough gray calls, in the deciding step) | targets |\n" +
	"|---|---:|---:|---|---|---:|---|---|---|---|---|\n"

// reporter is where row says what it found: a *testing.T.
type reporter interface {
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// row checks the targets over a plan item's runs, reports a missed target
// that is not a known miss as an error, and writes the item's row; it
// adds the known reasons it used to usedReasons.
func row(t reporter, p planned, rs []result, usedReasons map[string]bool) string {
	var qa, unmarked counts
	failures, ejections := map[string]int{}, map[string]int{}
	prodOnGray, restarts := 0, 0
	verdicts := map[string]int{}
	judgedText := ""
	var ev evidence
	var checksAll, checksEnough []int
	var byRestarts []int // of the runs rolled back on the gray build's restarts: their checks from the one that saw the limit-th
	// The misses of each target, each with the known reason's key ("":
	// not a known miss).
	type miss struct{ why, known string }
	misses := map[target][]miss{}
	missed := func(tg target, known, format string, args ...any) {
		misses[tg] = append(misses[tg], miss{fmt.Sprintf(format, args...), known})
	}
	for _, r := range rs {
		qa.plus(r.rep.Gray)
		unmarked.plus(r.rep.Unmarked)
		for k, v := range r.rep.Failures {
			failures[k] += v
		}
		for k, v := range r.rep.GrayEjections {
			ejections[k] += v
		}
		prodOnGray += r.prodOnGray
		restarts += r.restarts
		verdicts[verdictName(r.exit)]++
		judgedText = r.judged
		ev.ejectedMax = max(ev.ejectedMax, r.evidence.ejectedMax)
		ev.fellBack += r.evidence.fellBack
		ev.grayPicks += r.evidence.grayPicks
		ev.countChanges += r.evidence.countChanges
		checksAll = append(checksAll, r.checks)
		checksEnough = append(checksEnough, r.enough)
		if share(r.rep.Gray) > maxFailedShare || share(r.rep.Unmarked) > maxFailedShare {
			missed(targetFailed, p.build.known[targetFailed], "%s of QA and %s of unmarked requests failed from 5 s on", pct(r.rep.Gray), pct(r.rep.Unmarked))
		}
		if r.prodOnGray > 0 || r.rep.Gray.ProdOnGray+r.rep.Unmarked.ProdOnGray > 0 {
			missed(targetProdOnGray, p.build.known[targetProdOnGray], "%d prod requests reached a gray instance", r.prodOnGray)
		}
		switch {
		case p.build.bad() && r.exit != 3:
			missed(targetVerdict, p.build.known[targetVerdict], "%s, not rolled back", verdictName(r.exit))
		case p.build.bad() && r.onRestarts && r.afterRestarts > 2:
			// Its evidence is its restarts, not its calls: judged from the
			// check that saw the restart that reached the limit.
			missed(targetVerdict, p.build.known[targetVerdict], "rolled back at the %d. check after its %d. restart", r.afterRestarts, restartLimit)
		case p.build.bad() && !r.onRestarts && r.afterFirstRestart > 0:
			// Rolled back on its calls once it crashed: until its first
			// restart it answered as a healthy build does, and the check
			// that saw the restart counted few calls of the crash. Judged
			// from the check after it.
			if after := r.afterFirstRestart - 1; after > 2 {
				missed(targetVerdict, p.build.known[targetVerdict], "rolled back at the %d. check after the one that saw its first restart", after)
			}
		case p.build.bad() && !r.onRestarts && r.enough > 2:
			missed(targetVerdict, p.build.known[targetVerdict], "rolled back at the %d. check with enough gray calls", r.enough)
		case !p.build.bad() && r.exit == 3:
			missed(targetVerdict, p.build.known[targetVerdict], "rolled back, not passed (%s)", r.rollback)
		case !p.build.bad() && r.exit != 0:
			missed(targetVerdict, p.build.known[targetVerdict], "%s, not passed", verdictName(r.exit))
		}
		if r.onRestarts {
			byRestarts = append(byRestarts, r.afterRestarts)
		}
	}
	var notes []string
	for _, tg := range []target{targetFailed, targetProdOnGray, targetVerdict} {
		ms := misses[tg]
		var unknown []string
		known := map[string]bool{}
		for _, m := range ms {
			if m.known == "" {
				unknown = append(unknown, m.why)
			} else {
				known[m.known] = true
				usedReasons[m.known] = true
			}
		}
		keys := strings.Join(slices.Sorted(maps.Keys(known)), ", ")
		switch {
		case len(unknown) > 0:
			notes = append(notes, fmt.Sprintf("**%s missed: %s**", tg, unknown[0]))
			t.Errorf("%s with %d gray: target %q missed: %s", p.build.what, p.grays, tg, strings.Join(unknown, "; "))
		case len(ms) > 0:
			notes = append(notes, fmt.Sprintf("%s missed: %s (known: %s)", tg, ms[0].why, keys))
			t.Logf("known miss, %s: %s (%s)", tg, ms[0].why, keys)
		case p.build.known[tg] != "":
			t.Logf("%s with %d gray: target %q held, though listed as a known miss (%s): the entry can go", p.build.what, p.grays, tg, p.build.known[tg])
		}
	}
	if len(notes) == 0 {
		notes = []string{"met"}
	}
	what := p.build.what
	if restarts > 0 {
		what += fmt.Sprintf(" (%d restarts)", restarts)
	}
	verdict := mapText(verdicts, "")
	if len(rs) == 1 {
		verdict = verdictName(rs[0].exit)
		if judgedText != "" {
			verdict += "; the last check saw " + judgedText
		}
	}
	checksText := spread(checksAll) + " (" + spread(checksEnough) + ")"
	if len(byRestarts) > 0 {
		checksText += fmt.Sprintf("; rolled back on its restarts (%d of %d runs), %s check(s) from the one that saw its restart number %d",
			len(byRestarts), len(rs), spread(byRestarts), restartLimit)
	}
	return fmt.Sprintf("| %s | %d | %d | %s | %s | %d | %s | %s | %s | %s | %s |", what, p.grays, len(rs),
		failedText(qa, failures), pct(unmarked), prodOnGray, mapText(ejections, "none"), ev, verdict,
		checksText, strings.Join(notes, "; "))
}

func (c *counts) plus(o counts) {
	c.Sent += o.Sent
	c.Failed += o.Failed
	c.ServedByGray += o.ServedByGray
	c.ServedByProd += o.ServedByProd
	c.ProdOnGray += o.ProdOnGray
}

func share(c counts) float64 {
	if c.Sent == 0 {
		return 0
	}
	return float64(c.Failed) / float64(c.Sent)
}

func pct(c counts) string {
	return fmt.Sprintf("%d of %d (%.2f %%)", c.Failed, c.Sent, 100*share(c))
}

// failedText is the QA column: the share, and why requests failed (QA and
// unmarked together).
func failedText(c counts, failures map[string]int) string {
	s := pct(c)
	if len(failures) > 0 {
		s += " (all failures: " + mapText(failures, "") + ")"
	}
	return s
}

func verdictName(code int) string {
	switch code {
	case 0:
		return "passed"
	case 3:
		return "rolled back"
	case 4:
		return "no verdict"
	case -1:
		return "not run"
	}
	return fmt.Sprintf("exit %d", code)
}

// mapText writes m as "k: v, ..." sorted by key (empty when m is).
func mapText(m map[string]int, empty string) string {
	if len(m) == 0 {
		return empty
	}
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// spread writes a list of counts as one number or a range.
func spread(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}
