// Package policy holds graylb's load-balancing policies and what a policy
// of one's own is written against. A LoadBalancer runs its policy over
// each candidate list the routing left (graylb.WithPolicy; RoundRobin by
// default): NewPicker once per list change, the Picker's Next on every
// pick.
package policy

import "github.com/graylb/graylb/internal/engine"

// Policy builds a Picker over one candidate list:
//
//	NewPicker(instances []graylb.Instance) Picker
//
// NewPicker runs once per list change, never on the pick path; the list
// is non-empty and read-only.
type Policy = engine.Policy

// Picker chooses among the fixed, non-empty candidate list it was built
// over:
//
//	Next() int // an index into the list
//
// Next runs on every pick: it must be safe for concurrent use, must not
// block and should not allocate.
type Picker = engine.Picker

// StatsPolicy is a Policy whose pickers read the candidates' Stats, such
// as P2C:
//
//	NewStatsPicker(instances []graylb.Instance, stats []*Stats) Picker
//
// The LoadBalancer keeps Stats when its policy is a StatsPolicy (or with
// outlier detection) and then builds pickers with NewStatsPicker, stats[i]
// being the Stats of instances[i]; otherwise with NewPicker.
type StatsPolicy = engine.StatsPolicy

// Func adapts a function func(instances []graylb.Instance) Picker to a
// Policy.
type Func = engine.PolicyFunc

// Stats is what a LoadBalancer knows of one instance's calls, shared by
// every route that holds the instance. Its methods, safe for concurrent
// use and allocation-free:
//
//	InFlight() int64                      // calls started and not done
//	Latency() time.Duration               // peak-EWMA estimate, decayed to now; 0 before any result
//	Ejected() bool                        // ejected by outlier detection
//	Report(ok bool, latency time.Duration) // one result not started as a call; a nil Stats ignores it
//
// The adapters feed it (package adapter's Call.End); a policy reads it.
type Stats = engine.Stats
