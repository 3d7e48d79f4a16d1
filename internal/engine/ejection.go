package engine

import (
	"time"
)

// The defaults of OutlierConfig are graylb.DefaultConsecutiveFailures and the others.
const (
	DefaultConsecutiveFailures = 5
	DefaultBaseEjectionTime    = 30 * time.Second
	DefaultMaxEjectionTime     = 300 * time.Second
	DefaultMaxEjectionPercent  = 50
	DefaultPanicThreshold      = 50
	DefaultRateWindow          = 10 * time.Second
	DefaultRateMinRequests     = 20
	DefaultFailurePercentage   = 50
	DefaultOverloadPause       = time.Second
	DefaultMaxRetryAfter       = 30 * time.Second
)

// The rate test is in outlierrate.go, take-outs and readmissions in
// takeout.go, the routed lists in health.go.

// OutlierConfig is graylb.OutlierConfig.
type OutlierConfig struct {
	ConsecutiveFailures int
	BaseEjectionTime    time.Duration
	MaxEjectionTime     time.Duration
	// MaxEjectionPercent is within 1-100; other values take the default.
	MaxEjectionPercent int
	// PanicThreshold is within 1-100; other values take the default.
	PanicThreshold    int
	RateWindow        time.Duration
	RateMinRequests   int
	FailurePercentage int // within 1-100; other values take the default
	OverloadPause     time.Duration
	MaxRetryAfter     time.Duration
	// Clock gives time and timers to the ejection rule (nil: the system
	// clock); tests inject one to readmit without waiting.
	Clock Clock
	// OnEjection, when set, is told of every ejection and readmission,
	// outside any lock of the LoadBalancer's. It must not block.
	OnEjection func(Ejection)
}

// Ejection is graylb.Ejection.
type Ejection struct {
	Service string `json:"service"`
	Addr    string `json:"addr"`
	Kind    Kind   `json:"kind"` // the instance's kind
	// Requests is the kind of request it concerns, "" when every kind.
	Requests string `json:"requests,omitempty"`
	// Reason is why it went out: "consecutive-failures",
	// "failure-percentage", "failure-rate" or "overloaded" (a pause, which
	// counts toward no ejection); "" for a readmission.
	Reason string        `json:"reason,omitempty"`
	For    time.Duration `json:"forNs"`
	At     time.Time     `json:"at"` // when, by OutlierConfig.Clock
}

// Clock is the time source of outlier detection.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless
	// stop is called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// WithOutlierDetection is graylb.WithOutlierDetection.
func WithOutlierDetection(cfg OutlierConfig) Option {
	if cfg.ConsecutiveFailures <= 0 {
		cfg.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if cfg.BaseEjectionTime <= 0 {
		cfg.BaseEjectionTime = DefaultBaseEjectionTime
	}
	if cfg.MaxEjectionTime <= 0 {
		cfg.MaxEjectionTime = DefaultMaxEjectionTime
	}
	cfg.MaxEjectionTime = max(cfg.MaxEjectionTime, cfg.BaseEjectionTime)
	if cfg.MaxEjectionPercent < 1 || cfg.MaxEjectionPercent > 100 {
		cfg.MaxEjectionPercent = DefaultMaxEjectionPercent
	}
	if cfg.PanicThreshold < 1 || cfg.PanicThreshold > 100 {
		cfg.PanicThreshold = DefaultPanicThreshold
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if cfg.RateMinRequests <= 0 {
		cfg.RateMinRequests = DefaultRateMinRequests
	}
	if cfg.FailurePercentage < 1 || cfg.FailurePercentage > 100 {
		cfg.FailurePercentage = DefaultFailurePercentage
	}
	if cfg.OverloadPause == 0 {
		cfg.OverloadPause = DefaultOverloadPause
	}
	if cfg.MaxRetryAfter == 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	return func(c *config) { c.outlier = &cfg }
}
