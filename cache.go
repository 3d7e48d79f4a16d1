package graylb

import (
	"log/slog"
	"time"

	"github.com/graylb/graylb/internal/engine"
)

// Cache is a caching Supplier: the one New puts over its Supplier (which
// WithCacheOptions configures), or one given to New to share it. It is
// safe for concurrent use, and:
//
//   - keeps one subscription per service to its source and fans changes
//     out to its own watchers (stopping one watcher stops no other);
//   - keeps only usable instances that validate (Instance.Usable,
//     Instance.Validate; the service name aside), dropping the others with
//     a log line;
//   - serves the last good list while the source fails;
//   - with empty-update protection (WithEmptyProtection, on by default),
//     refuses an update that would empty a non-empty list, logs and counts
//     it, and after DefaultEmptyGrace (WithEmptyGrace) asks the source
//     again: a service still empty then is accepted as empty, unless the
//     source reports a refill, during which the answer is an update like
//     any other (refused when empty and asked again, held when it lost a
//     kind);
//   - with the same protection, holds a sudden shrink, an update in which
//     every instance of a kind vanished (WithPartition): while the source
//     reports a refill (see Supplier), for every kind until the refill
//     ends; otherwise, for the partitions with a non-empty key (in New's
//     Cache, the prod instances), up to DefaultSettle; then the newest
//     held list applies. A later update that is no sudden shrink applies
//     at once; other changes are never delayed;
//   - remembers a service whose first query failed for DefaultSeedRetry
//     (WithSeedRetry), answering calls for it with the same error, and
//     remembers a bounded number of such names.
//
// Its methods: Instances and Watch (a Supplier), Stats() CacheStats, and
// Close() error.
type Cache = engine.Cache

// NewCache returns a Cache over src.
func NewCache(src Supplier, opts ...CacheOption) (*Cache, error) {
	return engine.NewCache(src, opts...)
}

// CacheStats counts what a Cache did:
//
//	Applied      uint64 // lists installed: each service's first, then every update
//	RefusedEmpty uint64 // empty updates refused
//	HeldShrinks  uint64 // sudden shrinks held
type CacheStats = engine.CacheStats

// CacheOption configures a Cache.
type CacheOption = engine.CacheOption

// WithEmptyProtection turns the protection against empty updates and
// sudden shrinks on or off (default on).
func WithEmptyProtection(on bool) CacheOption { return engine.WithEmptyProtection(on) }

// WithEmptyGrace sets how long an empty update is refused before the
// source is asked again (default DefaultEmptyGrace). d <= 0 holds the last
// good list until a non-empty update arrives.
func WithEmptyGrace(d time.Duration) CacheOption { return engine.WithEmptyGrace(d) }

// WithShrinkProtection also holds an update that keeps less than keep
// (0-1; default 0, off) of the last good list, for up to settle (default
// DefaultSettle). Off by default: instances that deregister before they
// stop should stop getting traffic at once.
func WithShrinkProtection(keep float64, settle time.Duration) CacheOption {
	return engine.WithShrinkProtection(keep, settle)
}

// WithPartition sets the kind of each instance for sudden-shrink
// protection: instances with the same key form a partition, and an update
// in which every instance of a partition left is a sudden shrink
// (instances that only changed partition do not count). Outside a refill
// only partitions with a non-empty key are guarded. New sets it to guard
// the prod instances. key is called on list changes only and must classify
// as routing does at that moment; nil turns it off.
func WithPartition(key func(Instance) string) CacheOption { return engine.WithPartition(key) }

// WithSeedRetry sets how long a failed first query of a service is
// remembered (default DefaultSeedRetry); d <= 0 asks the source on every
// call.
func WithSeedRetry(d time.Duration) CacheOption { return engine.WithSeedRetry(d) }

// WithCacheLogger sets the Cache's logger (default slog.Default()).
func WithCacheLogger(l *slog.Logger) CacheOption { return engine.WithCacheLogger(l) }
