package graylb

import "github.com/graylb/graylb/internal/engine"

// This file is the LoadBalancer's read-only view of itself, for operators
// (package debugpage shows it) and metrics. Nothing here is on the pick
// path or changes routing. Every type marshals to JSON as shown.

// Services returns the names of the services the LoadBalancer routes,
// sorted: those picked at least once, and those its Cache follows for an
// adapter that routes on its own (the gRPC balancer).
func (lb *LoadBalancer) Services() []string { return lb.e().Services() }

// Snapshot returns the routing state of service, and false when the
// LoadBalancer does not route it (see Services). It takes no lock the
// pick path takes.
func (lb *LoadBalancer) Snapshot(service string) (ServiceState, bool) {
	return lb.e().Snapshot(service)
}

// ServiceState is one service's routing as it stands:
//
//	Service      string          `json:"service"`
//	Instances    []InstanceState `json:"instances"`    // those routing knows, prod first, in the Supplier's order
//	Prod         int             `json:"prod"`         // routable instances of each kind
//	Gray         int             `json:"gray"`
//	EjectedProd  int             `json:"ejectedProd"`  // ejected instances of each kind: listed in Instances,
//	EjectedGray  int             `json:"ejectedGray"`  // not usable, not counted in Prod and Gray
//	GrayFallback bool            `json:"grayFallback"` // no gray instance: gray requests reach every instance
type ServiceState = engine.ServiceState

// InstanceState is one instance as routing sees it:
//
//	Addr     string            `json:"addr"`
//	Kind     Kind              `json:"kind"`    // by its metadata or Rules.GrayAddresses
//	Version  string            `json:"version"` // its version metadata
//	Weight   float64           `json:"weight"`
//	Cluster  string            `json:"cluster"`
//	Usable   bool              `json:"usable"`  // may be picked: usable and not ejected
//	Stats    *InstanceStats    `json:"stats"`   // nil when the LoadBalancer keeps none for it
//	Subsets  []string          `json:"subsets"` // SubsetProd, SubsetGray, SubsetAll: which requests it serves
//	Metadata map[string]string `json:"metadata"` // a copy; untrusted text, escape it where shown
//
// where InstanceStats is
//
//	Ejected  bool          `json:"ejected"`   // by outlier detection
//	InFlight int64         `json:"inFlight"`  // calls started, not done
//	Latency  time.Duration `json:"latencyNs"` // peak-EWMA estimate, decayed to now
//	Failures int           `json:"failures"`  // failures in a row (with outlier detection)
type InstanceState = engine.InstanceState

// InstanceStats is a reading of an instance's calls (see InstanceState).
type InstanceStats = engine.InstanceStats

// Names in introspection and observers.
const (
	SubsetProd = engine.SubsetProd // "prod": serves prod requests (and gray ones while the rules are closed)
	SubsetGray = engine.SubsetGray // "gray": serves gray requests
	SubsetAll  = engine.SubsetAll  // "all": serves every request (gray routing off, or gray falling back)

	// UnroutedService ("<unrouted>") is the one service name under which an
	// Observer is told of the failed picks of every name the LoadBalancer
	// does not route (never had an instance, invalid, first query failed):
	// names can come from untrusted input, and state per name would grow
	// with them. No valid service has this name. Unrouted tells which.
	UnroutedService = engine.UnroutedService
)

// RulesState returns the rules in force, their source, and the last
// change and refusal.
func (lb *LoadBalancer) RulesState() RulesState { return lb.e().RulesState() }

// RulesState is what a LoadBalancer knows of its rules:
//
//	Rules            Rules      `json:"rules"`            // in force
//	Source           string     `json:"source"`           // the RuleSource's Describe, else its Go type; "program" without one
//	Changed          *time.Time `json:"changed"`          // when the rules in force were accepted; nil: never
//	Changes          uint64     `json:"changes"`          // rule sets accepted
//	Refused          uint64     `json:"refused"`          // rule sets refused
//	LastRefused      *time.Time `json:"lastRefused"`      // nil: never
//	LastRefusedRules *Rules     `json:"lastRefusedRules"` // nil when the document did not parse
//	LastRefusedError string     `json:"lastRefusedError"`
type RulesState = engine.RulesState

// Ejections returns what outlier detection did, and how many instances
// are ejected now (which ones: each service's Snapshot).
func (lb *LoadBalancer) Ejections() EjectionsState { return lb.e().Ejections() }

// EjectionsState is what a LoadBalancer knows of outlier detection:
//
//	Enabled      bool            `json:"enabled"`
//	Ejected      int             `json:"ejected"`      // instances ejected now
//	Ejections    uint64          `json:"ejections"`    // since New
//	Readmissions uint64          `json:"readmissions"` // since New
//	Counts       []EjectionCount `json:"counts"`       // the same by service, then kind
//	Last         *Ejection       `json:"last"`         // nil: none
//
// where EjectionCount is {Service string; Kind Kind; Ejections,
// Readmissions uint64}.
type EjectionsState = engine.EjectionsState

// EjectionCount counts the ejections and readmissions of one kind of
// instance of one service (see EjectionsState).
type EjectionCount = engine.EjectionCount

// Unrouted returns the failed picks of names the LoadBalancer does not
// route (see UnroutedService): how many, and the last few names.
func (lb *LoadBalancer) Unrouted() UnroutedState { return lb.e().Unrouted() }

// UnroutedState is the one aggregate of the failed picks of names the
// LoadBalancer does not route, bounded whatever names callers send:
//
//	Failed uint64         `json:"failed"` // since New
//	Recent []UnroutedPick `json:"recent"` // the last MaxUnroutedRecent names, newest first, each once
//
// where UnroutedPick is {Service string (untrusted text, cut to
// MaxServiceNameLen bytes); Kind Kind; Error string; At time.Time}.
type UnroutedState = engine.UnroutedState

// UnroutedPick is the last failed pick of one name (see UnroutedState).
type UnroutedPick = engine.UnroutedPick
