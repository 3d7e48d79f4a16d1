package graylb

import (
	"log/slog"
	"time"

	"github.com/graylb/graylb/internal/engine"
)

// Option configures a LoadBalancer.
type Option = engine.Option

// WithGrayHeader sets the request key that carries the gray value (default
// "gray"; some deployments use "gray-tag"). Every adapter takes it from
// the LoadBalancer (see Keys). An empty name keeps the default.
func WithGrayHeader(name string) Option {
	return engine.WithGrayHeader(name)
}

// WithGrayKey sets the instance metadata key that marks a gray instance
// (default "gray"). An empty key keeps the default.
func WithGrayKey(key string) Option {
	return engine.WithGrayKey(key)
}

// WithUserHeader sets the request key that carries the user id checked
// against the gray-user rule and hashed by the canary rule (default
// "uid"). An empty name keeps the default.
func WithUserHeader(name string) Option {
	return engine.WithUserHeader(name)
}

// WithSelfGray sets the calling service's own gray flag: the request's
// value when neither the call's key nor the context carries one. A gray
// deployment calls gray downstream by default.
func WithSelfGray(gray bool) Option {
	return engine.WithSelfGray(gray)
}

// WithFilters adds the user's filters; they run after the gray decision,
// in ascending Order. Nil filters are skipped.
func WithFilters(filters ...ServerFilter) Option {
	return engine.WithFilters(filters...)
}

// WithPolicy sets the load-balancing policy (default RoundRobin; nil keeps
// the default).
func WithPolicy(p Policy) Option {
	return engine.WithPolicy(p)
}

// WithContextHandler adds ContextHandlers that read request values (the
// httpctx and grpcctx adapters); the first non-empty value wins.
func WithContextHandler(h ...ContextHandler) Option {
	return engine.WithContextHandler(h...)
}

// WithObserver sets the pick observer.
func WithObserver(o Observer) Option {
	return engine.WithObserver(o)
}

// WithCallObserver sets the call observer: it is told of each call the
// adapters (the HTTP Transport, the gRPC balancer) made to an instance
// once the call is done (see CallObserver).
func WithCallObserver(o CallObserver) Option {
	return engine.WithCallObserver(o)
}

// WithLogger sets the logger (default slog.Default(); nil keeps it).
func WithLogger(l *slog.Logger) Option {
	return engine.WithLogger(l)
}

// WithRules sets the initial rules. New fails on invalid rules.
func WithRules(r Rules) Option {
	return engine.WithRules(r)
}

// WithRuleSource loads the rules from src and follows its changes.
func WithRuleSource(src RuleSource) Option {
	return engine.WithRuleSource(src)
}

const // DefaultRuleLoadTimeout bounds how long New waits for a rule source's
// first Load.
DefaultRuleLoadTimeout = engine.DefaultRuleLoadTimeout

// WithRuleLoadTimeout bounds how long New waits for the rule source's first
// Load (default DefaultRuleLoadTimeout; d <= 0 keeps the default). When it
// runs out, New returns with the initial rules (WithRules, else none) and
// the source's later changes still apply.
func WithRuleLoadTimeout(d time.Duration) Option {
	return engine.WithRuleLoadTimeout(d)
}

// WithCacheOptions configures the Cache that New puts over the Supplier.
func WithCacheOptions(opts ...CacheOption) Option {
	return engine.WithCacheOptions(opts...)
}
