package engine

import (
	"log/slog"
	"time"
)

// Option configures a LoadBalancer.
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

// WithGrayHeader sets the request key that carries the gray value (default
// "gray"; some deployments use "gray-tag"). Every adapter takes it from
// the LoadBalancer (see Keys). An empty name keeps the default.
func WithGrayHeader(name string) Option {
	return func(c *config) {
		if name != "" {
			c.gray.header = name
		}
	}
}

// WithGrayKey sets the instance metadata key that marks a gray instance
// (default "gray"). An empty key keeps the default.
func WithGrayKey(key string) Option {
	return func(c *config) {
		if key != "" {
			c.gray.metaKey = key
		}
	}
}

// WithUserHeader sets the request key that carries the user id checked
// against the gray-user rule and hashed by the canary rule (default
// "uid"). An empty name keeps the default.
func WithUserHeader(name string) Option {
	return func(c *config) {
		if name != "" {
			c.gray.userHeader = name
		}
	}
}

// WithSelfGray sets the calling service's own gray flag: the request's
// value when neither the call's key nor the context carries one. A gray
// deployment calls gray downstream by default.
func WithSelfGray(gray bool) Option {
	return func(c *config) { c.gray.selfGray = gray }
}

// WithFilters adds the user's filters; they run after the gray decision,
// in ascending Order. Nil filters are skipped.
func WithFilters(filters ...ServerFilter) Option {
	return func(c *config) { c.filters = append(c.filters, filters...) }
}

// WithPolicy sets the load-balancing policy (default RoundRobin; nil keeps
// the default).
func WithPolicy(p Policy) Option { return func(c *config) { c.policy = p } }

// WithContextHandler adds ContextHandlers that read request values (the
// httpctx and grpcctx adapters); the first non-empty value wins.
func WithContextHandler(h ...ContextHandler) Option {
	return func(c *config) { c.handlers = append(c.handlers, h...) }
}

// WithObserver sets the pick observer.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithCallObserver sets the call observer: it is told of each call the
// adapters (the HTTP Transport, the gRPC balancer) made to an instance
// once the call is done (see CallObserver).
func WithCallObserver(o CallObserver) Option { return func(c *config) { c.calls = o } }

// WithLogger sets the logger (default slog.Default(); nil keeps it).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithRules sets the initial rules. New fails on invalid rules.
func WithRules(r Rules) Option { return func(c *config) { c.rules = &r } }

// WithRuleSource loads the rules from src and follows its changes.
func WithRuleSource(src RuleSource) Option { return func(c *config) { c.ruleSource = src } }

// DefaultRuleLoadTimeout bounds how long New waits for a rule source's
// first Load.
const DefaultRuleLoadTimeout = 3 * time.Second

// WithRuleLoadTimeout bounds how long New waits for the rule source's first
// Load (default DefaultRuleLoadTimeout; d <= 0 keeps the default). When it
// runs out, New returns with the initial rules (WithRules, else none) and
// the source's later changes still apply.
func WithRuleLoadTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ruleLoadTimeout = d
		}
	}
}

// WithCacheOptions configures the Cache that New puts over the Supplier.
func WithCacheOptions(opts ...CacheOption) Option {
	return func(c *config) { c.cacheOpts = append(c.cacheOpts, opts...) }
}
