package graylb

import "github.com/graylb/graylb/internal/engine"

const // UnroutedService is the service name under which an Observer is told of
// a failed pick of a name the LoadBalancer does not route: a name that
// never had an instance (unknown to the supplier, or answered with an
// empty list), an invalid name, a name whose first query failed. Names
// can come from untrusted input (a Transport's URL host), so they all
// share this one name: an Observer that keeps state per service (the
// PickCounters, the otelgraylb Observer) stays bounded whatever names
// callers send, and still counts every failure. It is not a valid service
// name, so no service is ever counted under it. Which names failed:
// LoadBalancer.Unrouted.
//
// A service the LoadBalancer knows (one it routes, or one its Cache
// follows for an adapter: LoadBalancer.Services lists both) has its
// failed picks told under its own name.
UnroutedService = engine.UnroutedService

const // MaxUnroutedRecent is how many names UnroutedState.Recent keeps.
MaxUnroutedRecent = engine.MaxUnroutedRecent

// UnroutedState is the one aggregate of the failed picks of names the
// LoadBalancer does not route (see UnroutedService): a counter and the
// last few names. It keeps nothing else per name, so it stays bounded
// whatever names callers send.
type UnroutedState = engine.UnroutedState

// UnroutedPick is the last failed pick of one name.
type UnroutedPick = engine.UnroutedPick

// Unrouted returns the failed picks of names the LoadBalancer does not
// route: how many, and the last few names.
func (lb *LoadBalancer) Unrouted() UnroutedState {
	return (*engine.LoadBalancer)(lb).Unrouted()
}
