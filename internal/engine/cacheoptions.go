package engine

import (
	"log/slog"
	"time"
)

// DefaultEmptyGrace is graylb.DefaultEmptyGrace.
const DefaultEmptyGrace = 30 * time.Second

// CacheOption is graylb.CacheOption.
type CacheOption func(*Cache)

// WithEmptyProtection is graylb.WithEmptyProtection.
func WithEmptyProtection(on bool) CacheOption { return func(c *Cache) { c.protect = on } }

// WithEmptyGrace is graylb.WithEmptyGrace.
func WithEmptyGrace(d time.Duration) CacheOption { return func(c *Cache) { c.grace = d } }

// DefaultSettle is graylb.DefaultSettle.
const DefaultSettle = 10 * time.Second

// WithShrinkProtection is graylb.WithShrinkProtection.
func WithShrinkProtection(keep float64, settle time.Duration) CacheOption {
	return func(c *Cache) { c.shrinkKeep, c.settle = keep, settle }
}

// WithPartition is graylb.WithPartition.
func WithPartition(key func(Instance) string) CacheOption {
	return func(c *Cache) { c.partition = key }
}

// WithSeedRetry is graylb.WithSeedRetry.
func WithSeedRetry(d time.Duration) CacheOption { return func(c *Cache) { c.seedRetry = d } }

// WithCacheLogger is graylb.WithCacheLogger.
func WithCacheLogger(l *slog.Logger) CacheOption {
	return func(c *Cache) {
		if l != nil {
			c.logger = l
		}
	}
}
