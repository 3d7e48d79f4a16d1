package graylb

import "github.com/graylb/graylb/internal/engine"

// OutlierConfig configures outlier detection (WithOutlierDetection): each
// instance judged by its calls' results, for each kind of request apart.
// Fields left zero take the defaults:
//
//	ConsecutiveFailures int            // failures in a row that eject (DefaultConsecutiveFailures)
//	BaseEjectionTime    time.Duration  // ejected for this times the ejections in a row (DefaultBaseEjectionTime)
//	MaxEjectionTime     time.Duration  // at most this (DefaultMaxEjectionTime)
//	MaxEjectionPercent  int            // 1-100: at most this share of prod out at once (DefaultMaxEjectionPercent)
//	PanicThreshold      int            // 1-100: below this share usable, prod is routed over all (DefaultPanicThreshold)
//	RateWindow          time.Duration  // failure rates are judged over this; < 0: off (DefaultRateWindow)
//	RateMinRequests     int            // calls of a kind in the window before its rate is judged (DefaultRateMinRequests)
//	FailurePercentage   int            // 1-100: a share of failed calls that ejects (DefaultFailurePercentage)
//	OverloadPause       time.Duration  // pause after a 429 without Retry-After; < 0: none (DefaultOverloadPause)
//	MaxRetryAfter       time.Duration  // cap of a Retry-After pause; < 0: Retry-After ignored (DefaultMaxRetryAfter)
//	Clock               interface{...} // Now() time.Time; AfterFunc(d, f) (stop func() bool), f in its own goroutine; nil: the system clock
//	OnEjection          func(Ejection) // told of each ejection, pause and readmission; must not block
//
// An instance is ejected for a kind of request by failures of the kind in a
// row (or as many of any kind: for every kind), or by rate over the window:
// FailurePercentage percent failed, or a failure ratio five points or more
// above the other prod instances', beyond chance. A failure is what the adapter
// reports as one, a call its caller's deadline ended unanswered included.
// It is back when its time is up, at once when it answers a call begun after
// its ejection, or when listed again. An overloaded answer (429,
// ResourceExhausted) ejects nothing: it pauses the instance for every kind.
// Prod stays routable (the cap, and the panic threshold); every gray
// instance may go, gray requests then falling back to prod (FellBack). A
// prod request never reaches gray. docs/traffic.md has the detectors.
type OutlierConfig = engine.OutlierConfig

// Ejection is an ejection or pause (For > 0) or a readmission (For == 0)
// of an instance:
//
//	Service  string        `json:"service"`
//	Addr     string        `json:"addr"`
//	Kind     Kind          `json:"kind"`               // the instance's kind
//	Requests string        `json:"requests,omitempty"` // "gray" or "prod": the kind of request it concerns; "": every kind
//	Reason   string        `json:"reason,omitempty"`   // consecutive-failures, failure-percentage, failure-rate, overloaded; "": a readmission
//	For      time.Duration `json:"forNs"`              // in nanoseconds in JSON
//	At       time.Time     `json:"at"`                 // by OutlierConfig.Clock
type Ejection = engine.Ejection
