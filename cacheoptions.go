package graylb

import (
	"log/slog"
	"time"

	"github.com/graylb/graylb/internal/engine"
)

const // DefaultEmptyGrace is how long the Cache holds the last good list after
// the source reports an empty one, before it asks the source again.
DefaultEmptyGrace = engine.DefaultEmptyGrace

// CacheOption configures a Cache.
type CacheOption = engine.CacheOption

// WithEmptyProtection turns empty-update protection on or off (default on).
func WithEmptyProtection(on bool) CacheOption {
	return engine.WithEmptyProtection(on)
}

// WithEmptyGrace sets the grace period of empty-update protection.
func WithEmptyGrace(d time.Duration) CacheOption {
	return engine.WithEmptyGrace(d)
}

const // DefaultSettle is how long the Cache holds a sudden shrink (see Cache):
// long enough for Nacos clients to reconnect and register again after a
// server restart or a cluster node's loss (5-7 s measured with r-nacos).
DefaultSettle = engine.DefaultSettle

// WithShrinkProtection also holds an update that keeps less than keep
// (0-1; default 0, off) of the last good list, for up to settle (default
// DefaultSettle). Off by default: instances that deregister before they
// shut down should stop getting traffic at once.
func WithShrinkProtection(keep float64, settle time.Duration) CacheOption {
	return engine.WithShrinkProtection(keep, settle)
}

// WithPartition sets the kind of each instance (instances with the same
// key form a partition; for a LoadBalancer, the routing kind). An update
// in which every instance of a partition left the list is a sudden shrink
// (instances that only changed partition do not count). While the source
// refills (see Refiller) every partition is guarded, the one with the
// empty key included; otherwise, and for sources that are not Refillers,
// only partitions with a non-empty key are. graylb.New guards the prod
// instances that way: outside a refill, losing all gray instances is
// applied at once, as gray requests then fall back to prod. The function
// is called on list changes only and must classify as routing does at
// that moment. nil turns it off.
func WithPartition(key func(Instance) string) CacheOption {
	return engine.WithPartition(key)
}

// WithSeedRetry sets how long a failed first query of a service is
// remembered (default DefaultSeedRetry): calls for that service within the
// period return the same error without asking the source again; the first
// call after it asks again, so the Cache recovers on its own. Zero or less
// asks the source on every call.
func WithSeedRetry(d time.Duration) CacheOption {
	return engine.WithSeedRetry(d)
}

// WithCacheLogger sets the Cache's logger (default slog.Default()).
func WithCacheLogger(l *slog.Logger) CacheOption {
	return engine.WithCacheLogger(l)
}
