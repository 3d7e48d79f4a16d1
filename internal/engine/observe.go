package engine

import "time"

// Outcome is graylb.Outcome.
type Outcome uint8

// The outcomes are graylb.Selected and the others.
const (
	Selected Outcome = iota
	FellBack
	Bypassed
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

// Observer is graylb.Observer.
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

// CallObserver is graylb.CallObserver.
type CallObserver func(service string, inst Instance, kind Kind, ok bool, latency time.Duration)
