package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/shadow"
)

// counts are what the users of one kind of request saw.
type counts struct {
	Sent         int `json:"sent"`
	Failed       int `json:"failed"`
	ServedByGray int `json:"servedByGray"` // answered by a gray instance
	ServedByProd int `json:"servedByProd"`
	// ProdOnGray: answered by a gray instance that read a prod request
	// (graylb never sends one there).
	ProdOnGray int `json:"prodOnGray"`
}

func (c *counts) add(o outcome) {
	c.Sent++
	if o.failure != "" {
		c.Failed++
	}
	switch o.instance {
	case graylb.Gray.String():
		c.ServedByGray++
		if o.request == graylb.Prod.String() {
			c.ProdOnGray++
		}
	case graylb.Prod.String():
		c.ServedByProd++
	}
}

func (c *counts) plus(o counts) {
	c.Sent += o.Sent
	c.Failed += o.Failed
	c.ServedByGray += o.ServedByGray
	c.ServedByProd += o.ServedByProd
	c.ProdOnGray += o.ProdOnGray
}

// second is what the requests begun in one second saw.
type second struct {
	gray, unmarked counts
	failures       map[string]int
}

// tally counts the requests by the second they began in, and the
// ejections of gray instances by reason.
type tally struct {
	mu        sync.Mutex
	seconds   map[int64]*second
	ejections map[string]int
	shadow    map[string]int // shadow events by outcome
}

func newTally() *tally {
	return &tally{seconds: map[int64]*second{}, ejections: map[string]int{}, shadow: map[string]int{}}
}

// shadowed counts a shadow event (it must not block: a lock held briefly).
func (t *tally) shadowed(e shadow.Event) {
	t.mu.Lock()
	t.shadow[e.Outcome.String()]++
	t.mu.Unlock()
}

func (t *tally) add(start time.Time, gray bool, o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.seconds[start.Unix()]
	if s == nil {
		s = &second{failures: map[string]int{}}
		t.seconds[start.Unix()] = s
	}
	if gray {
		s.gray.add(o)
	} else {
		s.unmarked.add(o)
	}
	if o.failure != "" {
		s.failures[o.failure]++
	}
}

func (t *tally) ejected(e graylb.Ejection) {
	if e.For == 0 || e.Kind != graylb.Gray {
		return
	}
	t.mu.Lock()
	t.ejections[e.Reason+", "+requestsName(e.Requests)+" requests"]++
	t.mu.Unlock()
}

// report is /report's answer.
type report struct {
	// From and To: the requests begun in [From, To), whole seconds.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Gray counts    `json:"gray"` // requests sent with gray: true
	// Unmarked: requests sent without a gray header (the canary decides).
	Unmarked counts `json:"unmarked"`
	// Failures: why requests failed, how many each.
	Failures map[string]int `json:"failures"`
	// Now: the service's instances as routing sees them, the rules in
	// force, the ejections of gray instances since the start by reason.
	Instances     graylb.ServiceState `json:"instances"`
	Rules         graylb.Rules        `json:"rules"`
	GrayEjections map[string]int      `json:"grayEjections"`
	// Shadow: the shadow events since the start by outcome (same, differs,
	// failed, dropped, blocked-write, noise).
	Shadow map[string]int `json:"shadow"`
}

// report sums the seconds in [from, to): those that began at or after
// from and ended by to.
func (t *tally) report(from, to time.Time, lb *graylb.LoadBalancer, service string) report {
	first, end := from.Unix(), to.Unix()
	if from.After(time.Unix(first, 0)) {
		first++
	}
	r := report{From: time.Unix(first, 0), To: time.Unix(max(end, first), 0), Failures: map[string]int{}, GrayEjections: map[string]int{}, Shadow: map[string]int{}}
	t.mu.Lock()
	for s, b := range t.seconds {
		if s >= first && s < end {
			r.Gray.plus(b.gray)
			r.Unmarked.plus(b.unmarked)
			for k, v := range b.failures {
				r.Failures[k] += v
			}
		}
	}
	for k, v := range t.ejections {
		r.GrayEjections[k] = v
	}
	for k, v := range t.shadow {
		r.Shadow[k] = v
	}
	t.mu.Unlock()
	r.Instances, _ = lb.Snapshot(service)
	r.Instances.Instances = nil
	r.Rules = lb.RulesState().Rules
	return r
}

// serve answers /report?from=&to= (Unix milliseconds; default: since the
// start, until now).
func (t *tally) serve(w http.ResponseWriter, r *http.Request, lb *graylb.LoadBalancer, service string) {
	from, to := time.Unix(0, 0), time.Now()
	for k, p := range map[string]*time.Time{"from": &from, "to": &to} {
		if v := r.URL.Query().Get(k); v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				http.Error(w, k+": Unix milliseconds", http.StatusBadRequest)
				return
			}
			*p = time.UnixMilli(ms)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(t.report(from, to, lb, service))
}
