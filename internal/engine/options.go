package engine

import (
	"log/slog"
	"time"
)

// Option is graylb.Option.
type Option func(*config)

type config struct {
	gray       grayFilter
	filters    []ServerFilter
	policy     Policy
	handlers   []ContextHandler
	observer   Observer
	calls      CallObserver
	logger     *slog.Logger
	rules      *Rules
	ruleSource RuleSource
	cacheOpts  []CacheOption
	outlier    *OutlierConfig
	baggage    Baggage
	shadowObs  []ShadowObserver

	ruleLoadTimeout time.Duration
}

// WithGrayHeader is graylb.WithGrayHeader.
func WithGrayHeader(name string) Option {
	return func(c *config) {
		if name != "" {
			c.gray.header = name
		}
	}
}

// WithGrayKey is graylb.WithGrayKey.
func WithGrayKey(key string) Option {
	return func(c *config) {
		if key != "" {
			c.gray.metaKey = key
		}
	}
}

// WithUserHeader is graylb.WithUserHeader.
func WithUserHeader(name string) Option {
	return func(c *config) {
		if name != "" {
			c.gray.userHeader = name
		}
	}
}

// WithSelfGray is graylb.WithSelfGray.
func WithSelfGray(gray bool) Option {
	return func(c *config) { c.gray.selfGray = gray }
}

// WithFilters is graylb.WithFilters.
func WithFilters(filters ...ServerFilter) Option {
	return func(c *config) { c.filters = append(c.filters, filters...) }
}

// WithPolicy is graylb.WithPolicy.
func WithPolicy(p Policy) Option { return func(c *config) { c.policy = p } }

// WithContextHandler is graylb.WithContextHandler.
func WithContextHandler(h ...ContextHandler) Option {
	return func(c *config) { c.handlers = append(c.handlers, h...) }
}

// WithObserver is graylb.WithObserver.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithCallObserver is graylb.WithCallObserver.
func WithCallObserver(o CallObserver) Option { return func(c *config) { c.calls = o } }

// WithLogger is graylb.WithLogger.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithRules is graylb.WithRules.
func WithRules(r Rules) Option { return func(c *config) { c.rules = &r } }

// WithRuleSource is graylb.WithRuleSource.
func WithRuleSource(src RuleSource) Option { return func(c *config) { c.ruleSource = src } }

// DefaultRuleLoadTimeout is graylb.DefaultRuleLoadTimeout.
const DefaultRuleLoadTimeout = 3 * time.Second

// WithRuleLoadTimeout is graylb.WithRuleLoadTimeout.
func WithRuleLoadTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ruleLoadTimeout = d
		}
	}
}

// WithCacheOptions is graylb.WithCacheOptions.
func WithCacheOptions(opts ...CacheOption) Option {
	return func(c *config) { c.cacheOpts = append(c.cacheOpts, opts...) }
}
