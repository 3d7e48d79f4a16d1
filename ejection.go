package graylb

import "github.com/graylb/graylb/internal/engine"

// Defaults of OutlierConfig.
const (
	DefaultConsecutiveFailures = engine.DefaultConsecutiveFailures
	DefaultBaseEjectionTime    = engine.DefaultBaseEjectionTime
	DefaultMaxEjectionTime     = engine.DefaultMaxEjectionTime
	DefaultMaxEjectionPercent  = engine.DefaultMaxEjectionPercent
)

// OutlierConfig configures outlier detection (passive health checking):
// an instance whose calls fail ConsecutiveFailures times in a row is
// ejected, that is, not usable, for BaseEjectionTime times the number of
// times it was ejected in a row, at most MaxEjectionTime, and then
// readmitted. The multiplier starts again from one when an instance stays
// admitted for MaxEjectionTime.
//
// At most MaxEjectionPercent of a kind's instances (prod or gray, counted
// separately) are ejected at once, but one instance of a kind may always
// be: a kind with a single instance can lose it. An ejected instance is
// treated as any unusable one: a gray request whose gray instances are all
// ejected falls back to prod (Outcome FellBack), a prod request never
// reaches gray, and a kind with every instance ejected fails with a
// *NoInstanceError whose Ejected field says so.
//
// Zero fields take the defaults (5 failures, 30 s, 300 s, 50 %).
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
