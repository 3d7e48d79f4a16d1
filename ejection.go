package graylb

import "github.com/graylb/graylb/internal/engine"

// OutlierConfig configures outlier detection (WithOutlierDetection):
//
//	ConsecutiveFailures int            // failures in a row that eject an instance (DefaultConsecutiveFailures)
//	BaseEjectionTime    time.Duration  // ejected for this times the ejections in a row (DefaultBaseEjectionTime)
//	MaxEjectionTime     time.Duration  // at most this (DefaultMaxEjectionTime)
//	MaxEjectionPercent  int            // 1-100: at most this share of a kind ejected at once (DefaultMaxEjectionPercent)
//	Clock               interface{...} // time and timers, see below; nil: the system clock
//	OnEjection          func(Ejection) // told of each ejection and readmission; must not block
//
// Zero fields take the defaults. An ejected instance is not usable until
// readmitted; the count of ejections in a row starts again once an
// instance stays admitted for MaxEjectionTime. The share is counted per
// kind (prod, gray), but one instance of a kind may always be ejected. A
// gray request whose gray instances are all ejected falls back to prod
// (FellBack); a prod request never reaches gray; a kind with every
// instance ejected fails with a *NoInstanceError whose Ejected says how
// many. Clock is any value with Now() time.Time and AfterFunc(d
// time.Duration, f func()) (stop func() bool), which calls f in its own
// goroutine once d has elapsed unless stop is called first (stop reports
// whether it prevented the call); tests set one to readmit without
// waiting.
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
