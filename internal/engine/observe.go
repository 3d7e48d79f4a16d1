package engine

import "time"

// Outcome is what a pick did, for an Observer.
type Outcome uint8

const (
	// Selected: the request reached an instance of its own kind.
	Selected Outcome = iota
	// FellBack: a gray request was served from prod (no gray instance, or
	// the rules are closed).
	FellBack
	// Bypassed: gray routing is disabled by the rules; any instance.
	Bypassed
	// Failed: nothing to pick; the pick failed with an error wrapping
	// ErrNoInstance.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Selected:
		return "selected"
	case FellBack:
		return "fell_back"
	case Bypassed:
		return "bypassed"
	default:
		return "failed"
	}
}

// Observer is told of every pick's outcome, the way Envoy counts
// lb_subsets_selected and lb_subsets_fallback. It runs on the pick path:
// keep it short and non-blocking (an atomic add). A nil Observer costs
// nothing.
//
// Failed picks are told too: under the service's name for a service the
// LoadBalancer knows, and under UnroutedService for every name it does not
// route (names that never had an instance can come from untrusted input:
// the service names an Observer sees stay as few as the services it
// knows).
type Observer func(service string, kind Kind, outcome Outcome)

// Observers returns an Observer that tells each non-nil Observer given of
// every pick, in order: one LoadBalancer feeds debugpage.PickCounters and a metrics
// Observer at once. It returns nil when none is non-nil (a nil Observer
// costs nothing) and the Observer itself when only one is. It allocates
// nothing per pick.
func Observers(a Observer, more ...Observer) Observer {
	list := make([]Observer, 0, 1+len(more))
	for _, o := range append([]Observer{a}, more...) {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	case 2:
		x, y := list[0], list[1]
		return func(service string, kind Kind, outcome Outcome) {
			x(service, kind, outcome)
			y(service, kind, outcome)
		}
	}
	return func(service string, kind Kind, outcome Outcome) {
		for _, o := range list {
			o(service, kind, outcome)
		}
	}
}

// CallObserver is told of every call an adapter made to an instance, once
// the adapter ends it (package adapter's Call.End: the HTTP Transport for
// each try of a request, the gRPC balancer for each RPC):
// the service, the instance, the kind of the instances that served it,
// whether it succeeded, and its duration from the start of the call to the
// report. kind is gray only for a gray request the gray instances served;
// a gray request that fell back to prod (no gray instance, the rules
// closed) is prod, and with gray routing off (any instance serves) it is
// the request's kind. ok is false for a failure that counts against the
// instance (the adapter's rule: a connection failure, a 5xx answer, gRPC
// Unavailable) and for a call that ran past its caller's deadline (its
// caller saw it fail: package adapter's DeadlineNoAnswer and
// DeadlineAnswered). A call its caller cancelled is not told.
//
// It runs on the caller's goroutine after each call: keep it short and
// non-blocking (the otelgraylb module's CallObserver records a histogram
// without allocating). A nil CallObserver costs nothing.
type CallObserver func(service string, inst Instance, kind Kind, ok bool, latency time.Duration)
