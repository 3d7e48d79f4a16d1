package engine

// RefusalReporter is implemented by a RuleSource that can tell of the rule
// documents it refuses while watching: a document written after the first
// Load that does not parse or validate, which Watch skips (the previous
// rules stay in force). New subscribes when its rule source implements
// it, so RulesState, the debug page and the rules-refused metric count
// those refusals too, not only the rules SetRules and the first Load
// refuse. The subscription ends with Close.
type RefusalReporter interface {
	// OnRefused calls fn with the error of each refused document, an
	// error wrapping ErrInvalidRules, until stop is called. A source that
	// re-reads unchanged content reports it once, not on every read. fn
	// must not block. Calling stop more than once is harmless.
	OnRefused(fn func(err error)) (stop func())
}

// watchRefusals subscribes lb's rule log to src's refusals when src
// reports them; stop ends the subscription (a no-op otherwise).
func (lb *LoadBalancer) watchRefusals(src RuleSource) (stop func()) {
	rr, ok := src.(RefusalReporter)
	if !ok {
		return func() {}
	}
	stop = rr.OnRefused(func(err error) {
		if err != nil {
			lb.ruleLog.refused(nil, err)
		}
	})
	if stop == nil {
		return func() {}
	}
	return stop
}
