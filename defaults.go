package graylb

import "github.com/graylb/graylb/internal/engine"

// Defaults.
const (
	DefaultGrayHeader    = engine.DefaultGrayHeader    // "gray": the request key of the gray value
	DefaultGrayKey       = engine.DefaultGrayKey       // "gray": the metadata key of a gray instance
	DefaultUserHeader    = engine.DefaultUserHeader    // "uid": the request key of the user id
	DefaultVersionHeader = engine.DefaultVersionHeader // "version": the request key of the version
	DefaultVersionKey    = engine.DefaultVersionKey    // "version": the metadata key of an instance's version

	DefaultRuleLoadTimeout = engine.DefaultRuleLoadTimeout // 3 s: WithRuleLoadTimeout

	DefaultConsecutiveFailures = engine.DefaultConsecutiveFailures // 5: OutlierConfig
	DefaultBaseEjectionTime    = engine.DefaultBaseEjectionTime    // 30 s: OutlierConfig
	DefaultMaxEjectionTime     = engine.DefaultMaxEjectionTime     // 300 s: OutlierConfig
	DefaultMaxEjectionPercent  = engine.DefaultMaxEjectionPercent  // 50: OutlierConfig
	DefaultPanicThreshold      = engine.DefaultPanicThreshold      // 50: OutlierConfig
	DefaultRateWindow          = engine.DefaultRateWindow          // 10 s: OutlierConfig
	DefaultRateMinRequests     = engine.DefaultRateMinRequests     // 20: OutlierConfig
	DefaultFailurePercentage   = engine.DefaultFailurePercentage   // 50: OutlierConfig
	DefaultOverloadPause       = engine.DefaultOverloadPause       // 1 s: OutlierConfig
	DefaultMaxRetryAfter       = engine.DefaultMaxRetryAfter       // 30 s: OutlierConfig

	DefaultEmptyGrace = engine.DefaultEmptyGrace // 30 s: WithEmptyGrace
	DefaultSettle     = engine.DefaultSettle     // 10 s: WithShrinkProtection, and Cache
	DefaultSeedRetry  = engine.DefaultSeedRetry  // 1 s: WithSeedRetry
)

// Limits.
const (
	MaxServiceNameLen = engine.MaxServiceNameLen // bytes of a service name (ValidateServiceName)
	MaxRulesSize      = engine.MaxRulesSize      // bytes of a rule document (ParseRules)
	MaxMatches        = engine.MaxMatches        // match rules in one Rules
	MaxMatchKeyLen    = engine.MaxMatchKeyLen    // bytes of a Match's Key
	MaxMatchTextLen   = engine.MaxMatchTextLen   // bytes of a Match's Exact or Prefix
	MaxRegexLen       = engine.MaxRegexLen       // bytes of a Match's Regex
	MaxVersionLen     = engine.MaxVersionLen     // bytes of a Match's Version
	MaxUnroutedRecent = engine.MaxUnroutedRecent // names UnroutedState.Recent keeps
)
