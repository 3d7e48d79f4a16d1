package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// RulesState is graylb.RulesState.
type RulesState struct {
	// Rules are the rules in force (the zero Rules until a change).
	Rules Rules `json:"rules"`
	// Source names where rules come from: the RuleSource's description
	// (see Describer), else its Go type, when one is configured; else
	// "program" (WithRules, SetRules).
	Source string `json:"source"`
	// Changed is when the rules in force were accepted (nil: never).
	Changed *time.Time `json:"changed"`
	// Changes counts accepted rule sets; Refused counts refused ones.
	Changes uint64 `json:"changes"`
	Refused uint64 `json:"refused"`
	// LastRefused is when a rule set or document was last refused (nil:
	// never), with the rules refused (when it got as far as Rules) and
	// the error.
	LastRefused      *time.Time `json:"lastRefused"`
	LastRefusedRules *Rules     `json:"lastRefusedRules"`
	LastRefusedError string     `json:"lastRefusedError"`
}

// RulesState is graylb.LoadBalancer.RulesState.
func (lb *LoadBalancer) RulesState() RulesState {
	return lb.ruleLog.state()
}

// ruleLog records rule changes and refusals for RulesState. Its mutex
// also orders the accepted sets, so the rules it reports are the rules in
// force.
type ruleLog struct {
	mu sync.Mutex
	st RulesState
}

func (l *ruleLog) state() RulesState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st
	st.Rules = cloneRules(st.Rules)
	st.Changed, st.LastRefused = cloneTime(st.Changed), cloneTime(st.LastRefused)
	if st.LastRefusedRules != nil {
		r := cloneRules(*st.LastRefusedRules)
		st.LastRefusedRules = &r
	}
	if st.Source == "" {
		st.Source = "program"
	}
	return st
}

// store puts c (compiled from r) in force and records it.
func (l *ruleLog) store(dst *atomic.Pointer[compiledRules], c *compiledRules, r Rules) {
	l.mu.Lock()
	defer l.mu.Unlock()
	dst.Store(c)
	l.st.Rules = cloneRules(r)
	now := time.Now()
	l.st.Changed = &now
	l.st.Changes++
}

// refused records a rule set (r, when known) or document refused with err.
func (l *ruleLog) refused(r *Rules, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.Refused++
	now := time.Now()
	l.st.LastRefused = &now
	l.st.LastRefusedError = err.Error()
	l.st.LastRefusedRules = nil
	if r != nil {
		c := cloneRules(*r)
		l.st.LastRefusedRules = &c
	}
}

// loadFailed records a failed first Load of the rule source when the
// source refused the document (an error wrapping ErrInvalidRules).
func (l *ruleLog) loadFailed(err error) {
	if errors.Is(err, ErrInvalidRules) {
		l.refused(nil, err)
	}
}

// maxSourceDescription bounds the rule source's description kept.
const maxSourceDescription = 512

// setSource names the rule source: its description, else its type.
func (l *ruleLog) setSource(src RuleSource) {
	name := ""
	if d, ok := src.(Describer); ok {
		name = clip(d.Describe(), maxSourceDescription)
	}
	if name == "" {
		name = fmt.Sprintf("%T", src)
	}
	l.mu.Lock()
	l.st.Source = name
	l.mu.Unlock()
}

// cloneTime returns a copy of *t (nil for nil): a caller may change what
// it was handed.
func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// cloneRules returns a deep copy of r: Rules hold slices and a pointer the
// caller may change after handing them over.
func cloneRules(r Rules) Rules {
	if r.Enabled != nil {
		e := *r.Enabled
		r.Enabled = &e
	}
	if r.GrayUsers != nil {
		r.GrayUsers = append([]string(nil), r.GrayUsers...)
	}
	if r.GrayAddresses != nil {
		r.GrayAddresses = append([]string(nil), r.GrayAddresses...)
	}
	return r
}
