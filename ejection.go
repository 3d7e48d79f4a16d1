package graylb

import "github.com/graylb/graylb/internal/engine"

// OutlierConfig configures outlier detection (WithOutlierDetection), the
// passive health checking of each instance by its calls' results, for
// each kind of request apart (an instance failing only gray-marked
// requests stops getting those alone):
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
//	Clock               interface{...} // time and timers, see below; nil: the system clock
//	OnEjection          func(Ejection) // told of each ejection, pause and readmission; must not block
//
// An instance is ejected for a kind of request when that many calls of
// the kind fail in a row (or as many of any kind: then for every kind), or
// by rate over the window: when FailurePercentage percent of the kind's
// calls failed, or when its failure ratio is five points or more above its
// baseline's (the other prod instances' ratio over all their calls) beyond
// chance (a binomial bound below 1 in 10 000). A failure is what the
// adapter reports as one: a connection failure, a failure status, a call
// its caller's deadline ended before the instance answered or whose body
// failed. It is back when its ejection time is up, at once when it answers
// a call of that kind begun after its ejection, or when it is listed again.
//
// An overloaded answer (HTTP 429, gRPC ResourceExhausted) counts toward
// no ejection: it pauses the instance for every kind of request, for the
// answer's Retry-After (at most MaxRetryAfter) or else OverloadPause.
//
// The cap and the panic threshold (as Envoy's) keep prod routable: at most
// MaxEjectionPercent of the prod instances are out at once (one always
// may be), and below PanicThreshold percent usable, prod is routed over
// all of its instances rather than failed. Gray has prod as its fall-back:
// every gray instance may be ejected, a gray request whose gray instances
// are all out goes to prod (FellBack), and gray panics only when prod has
// no usable instance for it either. A prod request never reaches gray.
//
// Clock is any value with Now() time.Time and AfterFunc(d time.Duration,
// f func()) (stop func() bool), which calls f in its own goroutine once d
// has elapsed unless stop is called first (stop reports whether it
// prevented the call); tests set one to readmit without waiting.
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
