package graylb

import "github.com/graylb/graylb/internal/engine"

// Stats is what a LoadBalancer knows of one instance's calls: how many are
// in flight, a peak-EWMA estimate of their latency, and (with
// WithOutlierDetection) its consecutive failures and whether it is
// ejected. Every leaf of the routing tree that holds the instance shares
// one Stats, so a result reported through any route counts once. Calls
// feed it (package adapter's Route.Call, then Call.Done); latency-aware
// policies read it.
// It is safe for concurrent use; its methods do not allocate.
type Stats = engine.Stats
