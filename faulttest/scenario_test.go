package faulttest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// pair is one link of the client under test: the proxies on it, how the
// client sends a request, and what changes travel over it.
type pair struct {
	name string             // for the table: "client ↔ instances"
	link []*toxiproxy.Proxy // every proxy of the link (Nacos: HTTP and gRPC)
	send sender
	// prepareList, when set, readies a change of the instance list on the
	// far side of the link (a new prod instance); the function it returns
	// makes the change and returns the name of the instance whose answers
	// show that the change reached routing.
	prepareList func(t *testing.T, round string) (apply func() string)
	// changeRules, when set, makes user a gray user in the rules on the far
	// side of the link.
	changeRules func(t *testing.T, user string)
	// faulted names the instances behind the faulted link: their answers
	// show that the link serves again.
	faulted []string
}

// Times of a result that are not durations.
const (
	notApplicable time.Duration = -1 // the link carries no such change
	never         time.Duration = -2 // not within the wait
)

// result is what one fault on one pair cost.
type result struct {
	pair, fault     string
	lasted          time.Duration
	sent, failed    int
	wrong           int
	firstErr        string
	slowest         time.Duration // the longest a request that succeeded took
	list, rules     time.Duration // from the change (at the fault's start) until it was in force
	recovery        time.Duration // from the fault's end until routing was current again
	recoveryMissing string        // what never came back, when recovery is never
}

// recoveryWait bounds the wait for routing to be current again after a
// fault ends.
func recoveryWait() time.Duration {
	if long() {
		return 60 * time.Second
	}
	return 30 * time.Second
}

// run applies f to p under load and measures it.
func run(t *testing.T, p pair, f fault) result {
	t.Helper()
	round := fmt.Sprintf("%s-%d", f.name, time.Now().UnixNano()%1e6)
	probeUser := "u-" + round
	var applyList func() string
	if p.prepareList != nil {
		applyList = p.prepareList(t, round)
	}
	l := startLoad(t, p.send, probeUser)
	l.steady(t) // the load's steady state before the fault

	end := f.start(t, p.link)
	changed := time.Now()
	newName := ""
	if applyList != nil {
		newName = applyList()
	}
	if p.changeRules != nil {
		p.changeRules(t, probeUser)
	}
	time.Sleep(time.Until(changed.Add(f.dur))) // must sleep: the fault's duration is a fixed part of the plan
	end()
	ended := time.Now()

	// What shows routing current again, each a condition on a record.
	var conds []func(record) bool
	var what []string
	if newName != "" {
		conds = append(conds, func(r record) bool { return r.err == nil && r.from(newName) })
		what = append(what, "the new instance "+newName)
	}
	if p.changeRules != nil {
		conds = append(conds, func(r record) bool { return r.err == nil && r.stream == streamProbe && r.gray() })
		what = append(what, "the gray user's requests on gray")
	}
	for _, name := range p.faulted {
		conds = append(conds, func(r record) bool { return r.err == nil && r.from(name) && !r.start.Before(ended) })
		what = append(what, "answers of "+name)
	}
	firsts := l.waitUntil(ended.Add(recoveryWait()), conds...)
	l.steady(t) // the load's steady state after recovery
	recs := l.finish(t)

	res := result{pair: p.name, fault: f.what, lasted: f.dur, list: notApplicable, rules: notApplicable}
	var missing []string
	i := 0
	if newName != "" {
		res.list = durationOf(firsts[i], changed)
		i++
	}
	var ruleAt time.Time
	if p.changeRules != nil {
		res.rules = durationOf(firsts[i], changed)
		ruleAt = firsts[i].done
	}
	for j, r := range firsts {
		if r.done.IsZero() {
			missing = append(missing, what[j])
			continue
		}
		res.recovery = max(res.recovery, r.done.Sub(ended))
	}
	if len(missing) > 0 {
		res.recovery, res.recoveryMissing = never, strings.Join(missing, ", ")
	}

	for _, r := range recs {
		res.sent++
		if r.err == nil {
			res.slowest = max(res.slowest, r.done.Sub(r.start))
		}
		switch {
		case r.err != nil:
			if res.failed++; res.firstErr == "" {
				res.firstErr = r.err.Error()
			}
		case r.stream == streamGray && !r.gray(), r.stream == streamProd && r.gray():
			res.wrong++
		case r.stream == streamProbe && !ruleAt.IsZero() && r.start.After(ruleAt) && !r.gray():
			res.wrong++ // the rules had applied: the gray user's request went prod
		}
	}
	return res
}

// durationOf is the time from changed until r ended, never when r is the
// zero record.
func durationOf(r record, changed time.Time) time.Duration {
	if r.done.IsZero() {
		return never
	}
	return r.done.Sub(changed)
}

// row is the result as a row of RELIABILITY.md's table.
func (r result) row() string {
	failed := fmt.Sprint(r.failed)
	if r.firstErr != "" {
		failed += " (first: " + shorten(r.firstErr, 120) + ")"
	}
	return fmt.Sprintf("| %s | %s | %s | %d | %s | %d | %s | %s | %s | %s |\n",
		r.pair, r.fault, r.lasted, r.sent, failed, r.wrong, ms(r.slowest), ms(r.list), ms(r.rules), ms(r.recovery))
}

// check asserts the targets: no request of the wrong kind, no failed
// request (every request is an idempotent GET and a working instance of
// each kind is always there), routing current within 2 s after the fault
// ended; and that the load ran through the fault.
func (r result) check(t *testing.T) {
	t.Helper()
	if want := int(r.lasted/loadPeriod) * streams / 2; r.sent < want {
		t.Errorf("%s, %s: %d requests sent, want at least %d: the load did not run", r.pair, r.fault, r.sent, want)
	}
	if r.wrong != 0 {
		t.Errorf("%s, %s: %d requests of the wrong kind", r.pair, r.fault, r.wrong)
	}
	if r.failed != 0 {
		t.Errorf("%s, %s: %d of %d requests failed; the first: %s", r.pair, r.fault, r.failed, r.sent, r.firstErr)
	}
	switch {
	case r.recovery == never:
		t.Errorf("%s, %s: not current again within %v after the fault ended: %s never came", r.pair, r.fault, recoveryWait(), r.recoveryMissing)
	case r.recovery > 2*time.Second:
		t.Errorf("%s, %s: routing current again %v after the fault ended, want at most 2 s", r.pair, r.fault, r.recovery)
	}
}

// knownDefects maps a fault's name to the library defect that makes it
// miss its targets today; runPlan measures it, writes its row and skips
// it, naming the defect, instead of failing.
type knownDefects map[string]string

// runPlan runs every fault of the plan on p, one after the other, and
// writes the table's rows into the fragment named name.
func runPlan(t *testing.T, p pair, name string, known knownDefects) {
	t.Helper()
	var rows string
	for _, f := range plan() {
		t.Run(f.name, func(t *testing.T) {
			res := run(t, p, f)
			rows += res.row()
			t.Logf("%s", res.row())
			if d, ok := known[f.name]; ok {
				t.Skipf("known defect: %s (measured: %d of %d requests failed, %d of the wrong kind, current again %s after the fault)",
					d, res.failed, res.sent, res.wrong, ms(res.recovery))
			}
			res.check(t)
		})
	}
	t.Log("\n" + tableHead + rows)
	reliabilityFragment(t, name, rows)
}

// tableHead is the head of the table the rows make (scripts/reliability.sh
// writes the same above them).
const tableHead = "| link | fault | lasted | requests | failed | wrong kind | slowest answered | new instance routed to, after the change | gray user gray, after the change | routing current again, after the fault ended |\n" +
	"|---|---|---|---:|---|---:|---|---|---|---|\n"

// ms formats a duration in milliseconds; "n/a" for a change the link
// does not carry, "never" for one that did not come.
func ms(d time.Duration) string {
	switch d {
	case notApplicable:
		return "n/a"
	case never:
		return "never"
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
