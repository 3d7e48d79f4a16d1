package graylb

import "github.com/graylb/graylb/internal/engine"

// Observer is told of every pick's outcome: func(service string, kind
// Kind, outcome Outcome), kind being the request's. It runs on the pick
// path: keep it short and non-blocking. A failed pick of a name the
// LoadBalancer does not route is told under UnroutedService, so the names
// an Observer sees stay as few as the services the LoadBalancer knows.
type Observer = engine.Observer

// Outcome is what a pick did, for an Observer; String gives "selected",
// "fell_back", "bypassed" or "failed".
type Outcome = engine.Outcome

// The outcomes of a pick.
const (
	Selected Outcome = engine.Selected // the request reached an instance of its kind
	FellBack Outcome = engine.FellBack // a gray request reached prod: no usable gray instance, or the rules are closed
	Bypassed Outcome = engine.Bypassed // gray routing is off (Rules.Enabled): any instance
	Failed   Outcome = engine.Failed   // no instance: the pick's error wraps ErrNoInstance
)

// CallObserver is told of every call an adapter made to an instance once
// the call is done: func(service string, inst Instance, kind Kind, ok
// bool, latency time.Duration). kind is the kind of the instances that
// served the call: Gray only for a gray request served by gray instances.
// ok is false for a failure that counts against the instance (a
// connection failure, a 5xx answer, gRPC Unavailable) and for a call that
// ran past its caller's deadline; a call the caller cancelled is not
// told. latency runs from the start of the call to its end. It runs on
// the caller's goroutine: keep it short and non-blocking. A nil
// CallObserver costs nothing.
type CallObserver = engine.CallObserver
