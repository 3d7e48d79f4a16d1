package graylb

import (
	"net/http"

	"github.com/graylb/graylb/internal/engine"
)

// PickCounters counts picks by service, request kind and outcome, for the
// debug page. Install its Observe method as the LoadBalancer's Observer
// (WithObserver(c.Observe)), or call it from an Observer of your own. It
// allocates nothing once a service has been seen, and keeps only the
// services the LoadBalancer knows and UnroutedService, under which the
// failed picks of every name it does not route are counted.
type PickCounters = engine.PickCounters

// NewPickCounters returns empty counters.
func NewPickCounters() *PickCounters {
	return engine.NewPickCounters()
}

// DebugOption configures DebugHandler.
type DebugOption = engine.DebugOption

// WithPickCounters shows c's counts on the page (install c.Observe as the
// LoadBalancer's Observer).
func WithPickCounters(c *PickCounters) DebugOption {
	return engine.WithPickCounters(c)
}

// DebugHandler returns an http.Handler that shows lb's state for one
// process, as Envoy's /clusters or gRPC's channelz do: each routed
// service's instances (kind, version, weight, usability, ejection state,
// the subsets each lands in), the rules in force with their source and the
// times of the last change and of the last refusal with its error, the
// Cache's counters, and the pick counters when WithPickCounters is given.
//
// It serves an HTML page that needs nothing outside it (no script, no
// external style sheet) and, with ?format=json, the same data as JSON
// (DebugState). Every value is escaped: instance metadata comes from the
// registry and is untrusted. It answers GET and HEAD only, and changes
// nothing. Mount it where only operators reach it: it shows instance
// addresses, metadata and gray users.
func DebugHandler(lb *LoadBalancer, opts ...DebugOption) http.Handler {
	return engine.DebugHandler((*engine.LoadBalancer)(lb), opts...)
}

// DebugState is what DebugHandler shows, and its JSON: the
// LoadBalancer's own introspection types (Keys, ServiceState,
// UnroutedState, RulesState, CacheStats, EjectionsState), with the pick
// counters of WithPickCounters.
type DebugState = engine.DebugState
