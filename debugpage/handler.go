// Package debugpage serves a LoadBalancer's state to operators, as Envoy's
// /clusters or gRPC's channelz do: an HTML page and the same data as JSON,
// read from the LoadBalancer's introspection (Snapshot, Services,
// RulesState, Ejections, Unrouted), its Cache's counters and its dark
// launch's last differences (package shadow), with the pick counts of a
// PickCounters when one is given.
package debugpage

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// Option configures Handler.
type Option func(*handler)

// WithPickCounters shows c's counts on the page. Install c.Observe as the
// LoadBalancer's Observer, or nothing is counted.
func WithPickCounters(c *PickCounters) Option {
	return func(h *handler) { h.picks = c }
}

// Handler returns an http.Handler that shows lb's state for one process:
// each routed service's instances (kind, version, weight, usability,
// ejection state, the subsets each lands in), the rules in force with
// their source and the times of the last change and of the last refusal
// with its error, the Cache's counters, the failed picks of names lb does
// not route, the share of prod requests mirrored to the gray build and the
// last copies whose answers differed (both answers, bodies cut at
// ShownBody bytes, no header), the pick counts when WithPickCounters is
// given, and the sections of WithSection.
//
// It serves an HTML page that needs nothing outside it (no script, no
// external style sheet) and, with ?format=json, the same data as JSON
// (State). Every value is escaped: instance metadata comes from the
// registry and answers' bodies from services, all untrusted. It answers
// GET and HEAD only (other methods: 405), and changes nothing. Mount it
// where only operators reach it: it shows instance addresses, metadata,
// gray users and answers. It is safe for concurrent use.
func Handler(lb *graylb.LoadBalancer, opts ...Option) http.Handler {
	h := &handler{lb: lb}
	for _, o := range opts {
		if o != nil {
			o(h)
		}
	}
	return h
}

type handler struct {
	lb       *graylb.LoadBalancer
	picks    *PickCounters
	sections []section
}

// State is what Handler shows, and its JSON: the LoadBalancer's own
// introspection types, as they are, with the pick counts of
// WithPickCounters.
type State struct {
	Generated time.Time             `json:"generated"`
	Keys      graylb.Keys           `json:"keys"`
	Services  []graylb.ServiceState `json:"services"` // lb.Snapshot of each of lb.Services
	// Picks are the PickCounters' counts (PickCounters.Counts) of each
	// service listed and of graylb.UnroutedService; omitted without
	// WithPickCounters.
	Picks     map[string]map[string]map[string]uint64 `json:"picks,omitempty"` // service → kind → outcome → count
	Unrouted  graylb.UnroutedState                    `json:"unrouted"`        // lb.Unrouted
	Rules     graylb.RulesState                       `json:"rules"`           // lb.RulesState
	Cache     graylb.CacheStats                       `json:"cache"`           // the Cache's Stats
	Ejections graylb.EjectionsState                   `json:"ejections"`       // lb.Ejections
	// Shadow is the dark launch: the share mirrored and the last copies
	// whose answers differed from prod's (package shadow).
	Shadow ShadowState `json:"shadow"`
	// Sections are the values of the WithSection options, in their order;
	// omitted without any.
	Sections []Section `json:"sections,omitempty"`
}

// state returns what the page shows now.
func (h *handler) state() State {
	lb := h.lb
	st := State{Generated: time.Now(), Keys: lb.Keys(), Services: []graylb.ServiceState{},
		Unrouted: lb.Unrouted(), Rules: lb.RulesState(), Cache: adapter.For(lb).Cache().Stats(), Ejections: lb.Ejections(),
		Shadow: shadowState(lb), Sections: h.sectionStates()}
	if h.picks != nil {
		st.Picks = map[string]map[string]map[string]uint64{}
		if c := h.picks.Counts(graylb.UnroutedService); c != nil {
			st.Picks[graylb.UnroutedService] = c
		}
	}
	for _, name := range lb.Services() {
		ss, ok := lb.Snapshot(name)
		if !ok {
			continue
		}
		st.Services = append(st.Services, ss)
		if h.picks != nil {
			if c := h.picks.Counts(name); c != nil {
				st.Picks[name] = c
			}
		}
	}
	return st
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	st := h.state()
	if r.URL.Query().Get("format") == "json" {
		hd.Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
		return
	}
	hd.Set("Content-Type", "text/html; charset=utf-8")
	// Nothing but the page's own inline style: no script runs, whatever
	// the metadata says.
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
	_ = debugPage.Execute(w, st)
}
