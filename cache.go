package graylb

import "github.com/graylb/graylb/internal/engine"

// Cache is the caching Supplier the LoadBalancer runs on. It keeps one
// subscription per service to its source and fans changes out to its own
// watchers (so unsubscribing one watcher never drops another). It keeps
// only usable instances (healthy, enabled, weight > 0) whose host and port
// are valid (see Instance.Validate; the service name aside), whatever the
// source: an invalid one (port 0, a host that is no IP address or host
// name, or one no gray rule can name, such as 010.0.0.7) is dropped with a
// log line, as the Registry and the nacos supplier refuse them. It serves
// the last good list when the source fails, and protects against empty
// updates:
//
// With protection on (the default), an update that would empty a non-empty
// list is refused, logged and counted, and the last good list keeps
// serving. After the grace period (DefaultEmptyGrace) the Cache asks the
// source once more: if the service is still empty, the empty list is
// accepted, so a service that really went to zero instances does not stay
// stale forever (nacos-sdk-go issue #781). A grace of zero or less holds the
// last good list until a non-empty update arrives.
//
// With the same protection, a sudden shrink (an update in which every
// instance of a kind vanished; see WithPartition and WithShrinkProtection)
// can be held: that is what a registry shows while its clients register
// again after a restart, in whatever order they reconnect. When the source
// reports registry refills (it implements Refiller), a sudden shrink is
// held only while a refill is under way, and then for every kind (prod and
// gray alike: a refill changes nothing for traffic of either kind), until
// the refill window ends; outside a refill it is applied at the next update,
// so a deliberate deregistration takes effect at once. A source that does
// not report refills gets the guarded kinds (non-empty partition keys: for
// a LoadBalancer, prod) held for up to DefaultSettle. A later update that is
// no longer a sudden shrink is applied at once; when the hold ends the
// newest held list is applied. Other changes are never delayed.
//
// A service whose first query fails is remembered for a short while (see
// WithSeedRetry): callers asking for it meanwhile get the same error at
// once instead of waiting on an unreachable source again. At most
// maxSeedFailures names are remembered, so memory stays bounded whatever
// names callers send.
type Cache = engine.Cache

// NewCache returns a Cache over src.
func NewCache(src Supplier, opts ...CacheOption) (*Cache, error) {
	return engine.NewCache(src, opts...)
}

// CacheStats counts what the Cache did.
type CacheStats = engine.CacheStats
