package graylb

import (
	"log/slog"
	"time"

	"github.com/graylb/graylb/internal/engine"
	"github.com/graylb/graylb/policy"
)

// Option configures a LoadBalancer (New). A nil Option is ignored.
type Option = engine.Option

// WithGrayHeader sets the request key that carries the gray value
// (default DefaultGrayHeader; "" keeps it). Every adapter takes it from
// the LoadBalancer (see Keys).
func WithGrayHeader(name string) Option { return engine.WithGrayHeader(name) }

// WithGrayKey sets the instance metadata key that marks a gray instance
// (default DefaultGrayKey; "" keeps it).
func WithGrayKey(key string) Option { return engine.WithGrayKey(key) }

// WithUserHeader sets the request key that carries the user id, checked
// against Rules.GrayUsers and hashed by Rules.CanaryPercent (default
// DefaultUserHeader; "" keeps it).
func WithUserHeader(name string) Option { return engine.WithUserHeader(name) }

// WithSelfGray sets the calling service's own gray flag: a request is
// gray when neither the call's keys nor the context say otherwise and
// gray is true, so a gray deployment calls gray downstream.
func WithSelfGray(gray bool) Option { return engine.WithSelfGray(gray) }

// WithFilters adds filters (package filter has the ready-made ones); they
// run after the gray decision, in ascending Order, equal orders in the
// order given. Nil filters are skipped.
func WithFilters(filters ...ServerFilter) Option { return engine.WithFilters(filters...) }

// WithPolicy sets the load-balancing policy (package policy; default
// policy.RoundRobin(); nil keeps it).
func WithPolicy(p policy.Policy) Option { return engine.WithPolicy(p) }

// WithContextHandler adds ContextHandlers that read request values; for
// each value the first non-empty answer wins. The adapters (httpctx,
// grpcctx) read their own transport's keys without one.
func WithContextHandler(h ...ContextHandler) Option { return engine.WithContextHandler(h...) }

// WithObserver sets the Observers told of every pick, in the order given;
// nil ones are skipped. A later WithObserver replaces them.
func WithObserver(o ...Observer) Option {
	if len(o) == 0 {
		return engine.WithObserver(nil)
	}
	return engine.WithObserver(engine.Observers(o[0], o[1:]...))
}

// WithCallObserver sets the CallObserver told of every call an adapter
// made to an instance, once the call is done.
func WithCallObserver(o CallObserver) Option { return engine.WithCallObserver(o) }

// WithLogger sets the logger (default slog.Default(); nil keeps it).
func WithLogger(l *slog.Logger) Option { return engine.WithLogger(l) }

// WithRules sets the rules in force at start. New fails on invalid rules.
func WithRules(r Rules) Option { return engine.WithRules(r) }

// WithRuleSource loads the rules from src and follows its changes
// (package filerules reads a file; the nacos and redisrules modules read
// their stores).
func WithRuleSource(src RuleSource) Option { return engine.WithRuleSource(src) }

// WithRuleLoadTimeout bounds how long New waits for the rule source's
// first Load (default DefaultRuleLoadTimeout; d <= 0 keeps it). When it
// runs out, New returns with the rules of WithRules (else none) in force,
// and the source's later changes still apply.
func WithRuleLoadTimeout(d time.Duration) Option { return engine.WithRuleLoadTimeout(d) }

// WithCacheOptions configures the Cache New puts over the Supplier.
func WithCacheOptions(opts ...CacheOption) Option { return engine.WithCacheOptions(opts...) }

// WithOutlierDetection turns outlier detection on (see OutlierConfig).
// The adapters report each call's result for the instance that served
// it; a program that picks by hand reports through package adapter.
func WithOutlierDetection(cfg OutlierConfig) Option { return engine.WithOutlierDetection(cfg) }
