package graylb

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
type Observer func(service string, kind Kind, outcome Outcome)
