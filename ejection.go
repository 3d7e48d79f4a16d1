package graylb

import "github.com/graylb/graylb/internal/engine"

// OutlierConfig configures outlier detection (WithOutlierDetection), the
// passive health checking of each instance by its calls' results:
//
//	ConsecutiveFailures int            // failures in a row that eject an instance (DefaultConsecutiveFailures)
//	BaseEjectionTime    time.Duration  // ejected for this times the ejections in a row (DefaultBaseEjectionTime)
//	MaxEjectionTime     time.Duration  // at most this (DefaultMaxEjectionTime)
//	MaxEjectionPercent  int            // 1-100: at most this share of a kind ejected at once (DefaultMaxEjectionPercent)
//	PanicThreshold      int            // 1-100: below this share of usable instances a kind is routed over all (DefaultPanicThreshold)
//	Clock               interface{...} // time and timers, see below; nil: the system clock
//	OnEjection          func(Ejection) // told of each ejection and readmission; must not block
//
// Zero fields take the defaults. A failure is what the adapter reports as
// one: a connection failure, a failure status, and a call its caller's
// deadline ended before the instance answered (an instance that hangs
// fails its calls too). An ejected instance is not usable until
// readmitted; the count of ejections in a row starts again once an
// instance stays admitted for MaxEjectionTime. The share is counted per
// kind (prod, gray), but one instance of a kind may always be ejected. A
// gray request whose gray instances are all ejected falls back to prod
// (FellBack); a prod request never reaches gray.
//
// Ejection never takes a kind's last usable instances away for good (the
// panic threshold, as Envoy's): when fewer than PanicThreshold percent of
// a kind's instances are usable, the kind is routed over all of its
// instances, ejected ones included, rather than failed; the gray kind
// first falls back to prod and panics only when prod has no usable
// instance either. An ejected instance is back at once when it answers a
// call begun after its ejection, or when it leaves the service's list and
// is listed again (it re-registered).
//
// Clock is any value with Now() time.Time and AfterFunc(d time.Duration,
// f func()) (stop func() bool), which calls f in its own goroutine once d
// has elapsed unless stop is called first (stop reports whether it
// prevented the call); tests set one to readmit without waiting.
type OutlierConfig = engine.OutlierConfig

// Ejection is an ejection (For > 0) or a readmission (For == 0) of an
// instance:
//
//	Service string        `json:"service"`
//	Addr    string        `json:"addr"`
//	Kind    Kind          `json:"kind"`
//	For     time.Duration `json:"forNs"` // in nanoseconds in JSON
//	At      time.Time     `json:"at"`    // by OutlierConfig.Clock
type Ejection = engine.Ejection
