package graylb

import "github.com/graylb/graylb/internal/engine"

// Defaults of OutlierConfig.
const (
	DefaultConsecutiveFailures = engine.DefaultConsecutiveFailures
	DefaultBaseEjectionTime    = engine.DefaultBaseEjectionTime
	DefaultMaxEjectionTime     = engine.DefaultMaxEjectionTime
	DefaultMaxEjectionPercent  = engine.DefaultMaxEjectionPercent
	DefaultPanicThreshold      = engine.DefaultPanicThreshold
)

// OutlierConfig configures outlier detection (passive health checking):
// an instance whose calls fail ConsecutiveFailures times in a row is
// ejected, that is, not usable, for BaseEjectionTime times the number of
// times it was ejected in a row, at most MaxEjectionTime, and then
// readmitted. The multiplier starts again from one when an instance stays
// admitted for MaxEjectionTime. A failure is what the adapter reports as
// one: a connection failure, a failure status, and a call its caller's
// deadline ended before the instance answered (an instance that hangs
// fails its calls, too).
//
// At most MaxEjectionPercent of a kind's instances (prod or gray, counted
// separately) are ejected at once, but one instance of a kind may always
// be. An ejected instance is treated as any unusable one: a gray request
// whose gray instances are all ejected falls back to prod (Outcome
// FellBack), and a prod request never reaches gray.
//
// Ejection never takes a kind's last usable instances away for good (the
// panic threshold, as Envoy's): when fewer than PanicThreshold percent of
// a kind's instances are usable, the kind is routed over all of its
// instances, ejected ones included, rather than failed. The gray kind
// first falls back to prod: it panics only when every gray instance is
// ejected and prod has no usable instance either. The default, 50 %, is
// Envoy's, and with the default MaxEjectionPercent (50) it never overrides
// ejection in a kind of two or more instances; it takes effect for a kind
// whose single instance is ejected (a lone prod instance restarting
// serves again as soon as it answers, instead of failing every request
// for its ejection time) and for a MaxEjectionPercent above 50.
//
// An ejected instance is back at once when it answers a call begun after
// its ejection (a call routed to it in a panic) or when it leaves the
// service's list and is listed again (it re-registered): its state starts
// afresh.
//
// Zero fields take the defaults (5 failures, 30 s, 300 s, 50 %, 50 %).
type OutlierConfig = engine.OutlierConfig

// Ejection is an ejection (For > 0) or a readmission (For == 0) of an
// instance of a service. In JSON, For is in nanoseconds (as encoding/json
// writes a time.Duration), under the key forNs.
type Ejection = engine.Ejection

// Clock is the time source of outlier detection.
type Clock = engine.Clock

// WithOutlierDetection turns outlier detection on (see OutlierConfig).
// Adapters report each call's result for the instance that served it
// (httpctx's Transport and grpcctx's picker do it themselves); a program
// that picks by hand reports through package adapter (Route.Call and
// Call.Done, or Balancer.Report). Reporting a
// result costs a few atomic operations; only an ejection or a
// readmission rebuilds the service's routing, once, on the goroutine that
// reported it.
func WithOutlierDetection(cfg OutlierConfig) Option {
	return engine.WithOutlierDetection(cfg)
}
