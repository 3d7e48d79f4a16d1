package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb/internal/fanout"
	"github.com/graylb/graylb/internal/ring"
)

// At most maxSeedFailures names of services whose first query failed are
// remembered (cacheseed.go), so memory stays bounded whatever names callers
// send.

// Cache is graylb.Cache.
type Cache struct {
	src     Supplier
	protect bool
	grace   time.Duration
	logger  *slog.Logger

	mu      sync.Mutex
	closed  bool
	entries map[string]*cacheEntry
	// life ends with Close: seeds in flight run under it, and callers
	// waiting on one stop waiting.
	life    context.Context
	endLife context.CancelFunc

	shrinkKeep float64
	settle     time.Duration
	partition  func(Instance) string

	seedRetry time.Duration
	failed    map[string]seedFailure // guarded by mu; at most maxSeedFailures
	// failedOrder holds the names in failed in the order they came, the
	// oldest dropped first.
	failedOrder ring.Ring[string]

	refused atomic.Uint64
	applied atomic.Uint64
	held    atomic.Uint64
}

// NewCache is graylb.NewCache.
func NewCache(src Supplier, opts ...CacheOption) (*Cache, error) {
	if src == nil {
		return nil, errors.New("graylb: nil supplier")
	}
	c := &Cache{src: src, protect: true, grace: DefaultEmptyGrace, logger: slog.Default(), entries: map[string]*cacheEntry{},
		settle: DefaultSettle, seedRetry: DefaultSeedRetry, failed: map[string]seedFailure{}}
	c.life, c.endLife = context.WithCancel(context.Background())
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c, nil
}

type cacheEntry struct {
	seeded atomic.Bool   // set once seeded (err and snap are set before it)
	wait   chan struct{} // made by the first caller that waits, under Cache.mu; closed once seeded
	err    error         // seed error

	snap atomic.Pointer[[]Instance]

	mu       sync.Mutex // serialises apply and delivery
	stop     func()
	watchers fanout.Set[func([]Instance)]
	recheck  *time.Timer
	hold     *heldShrink // nil unless a sudden shrink is held

	// delivering is set while apply calls the watchers (e.mu held);
	// forgotten once forgetEmpty dropped the entry. A watcher's stop
	// called from a watcher's callback must not take e.mu (apply holds
	// it): forgetEmpty then leaves the release of the entry (its
	// subscription to the source, its timers) to apply, which does it once
	// its delivery ends. Each side stores its flag before it reads the
	// other's, so at least one of them releases (release is idempotent).
	delivering atomic.Bool
	forgotten  atomic.Bool
}

// CacheStats is graylb.CacheStats.
type CacheStats struct {
	Applied      uint64 `json:"applied"`      // lists installed: each service's first non-empty list, then every update that replaced one
	RefusedEmpty uint64 `json:"refusedEmpty"` // empty updates refused by the protection
	HeldShrinks  uint64 `json:"heldShrinks"`  // sudden shrinks held for the settle period
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Applied: c.applied.Load(), RefusedEmpty: c.refused.Load(), HeldShrinks: c.held.Load()}
}

// Instances returns the cached usable instances of service, subscribing to
// the source on first use.
func (c *Cache) Instances(ctx context.Context, service string) ([]Instance, error) {
	e, err := c.entry(ctx, service, false)
	if err != nil {
		return nil, err
	}
	return *e.snap.Load(), nil
}

// Watch calls fn with the usable instances of service each time they
// change. Calls for one service do not overlap and come in order.
//
// When the last watcher of a service whose list is empty stops (a name
// nothing was ever registered under, such as a gRPC target to an unknown
// name once its connection closed), the Cache forgets the name as it
// forgets one it was merely asked about (see forgetEmpty): its entry and
// its subscription to the source go, so memory stays bounded whatever
// names callers watch.
//
// The stop may be called from fn itself (a watcher that stops once the
// list is empty). A stop that runs while the Cache delivers an update of
// the service, from fn or not, does not wait for the delivery: when it
// made the name forgotten, the Cache lets go of the name's subscription as
// that delivery ends, before the source's call that delivered the update
// returns.
func (c *Cache) Watch(service string, fn func([]Instance)) (func(), error) {
	if fn == nil {
		return nil, errors.New("graylb: nil watch function")
	}
	for {
		e, err := c.entry(context.Background(), service, true)
		if err != nil {
			return nil, err
		}
		// Add under c.mu, so forgetEmpty never drops an entry that has
		// just gained a watcher.
		c.mu.Lock()
		if c.entries[service] == e {
			id := e.watchers.AddID(fn)
			c.mu.Unlock()
			return func() {
				if e.watchers.Remove(id) { // once: a second call finds nothing
					c.forgetEmpty(service)
				}
			}, nil
		}
		c.mu.Unlock()
	}
}

// forgetEmpty drops the entry of a service whose list is empty and that
// nobody watches (a name nothing was ever registered under, for a source
// that answers such names with an empty list rather than an error; the
// LoadBalancer asks after a pick found nothing, Watch when the last
// watcher leaves), and
// remembers it like a failed first query (see WithSeedRetry): the Cache
// then keeps nothing per name it was merely asked about, so memory stays
// bounded whatever names callers send. Instances gives an error wrapping
// ErrNoInstance for it meanwhile; Watch subscribes again.
func (c *Cache) forgetEmpty(service string) {
	c.mu.Lock()
	e := c.entries[service]
	if e == nil {
		c.mu.Unlock()
		return
	}
	if !e.seededOK() {
		c.mu.Unlock()
		return
	}
	if s := e.snap.Load(); e.err != nil || s == nil || len(*s) > 0 || e.watchers.Len() > 0 {
		c.mu.Unlock()
		return
	}
	delete(c.entries, service)
	if c.seedRetry > 0 && c.failed != nil {
		c.rememberFailure(service, fmt.Errorf("graylb: %q has no instances: %w", service, ErrNoInstance))
	}
	e.forgotten.Store(true)
	c.mu.Unlock()
	if e.delivering.Load() {
		// apply is calling the watchers, maybe this very goroutine's
		// caller: it releases the entry when its delivery ends.
		return
	}
	e.mu.Lock()
	stop := e.releaseLocked()
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// releaseLocked stops e's timers and returns its subscription's stop
// (nil when released already), for the caller to call once e.mu is
// released; e.mu is held.
func (e *cacheEntry) releaseLocked() (stop func()) {
	stop = e.stop
	e.stop = nil
	if e.recheck != nil {
		e.recheck.Stop()
		e.recheck = nil
	}
	if e.hold != nil {
		e.hold.timer.Stop()
		e.hold = nil
	}
	return stop
}

// entry returns the entry of service, seeding it on first use. A name
// remembered as failed gives its error, unless watch is set (a watcher
// subscribes again).
func (c *Cache) entry(ctx context.Context, service string, watch bool) (*cacheEntry, error) {
	if err := ValidateServiceName(service); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	e := c.entries[service]
	if e == nil {
		if f, ok := c.failed[service]; ok {
			if time.Now().Before(f.until) && !watch {
				c.mu.Unlock()
				return nil, f.err
			}
			delete(c.failed, service)
		}
		e = &cacheEntry{}
		c.entries[service] = e
		c.mu.Unlock()
		c.seed(ctx, service, e)
	} else {
		c.mu.Unlock()
	}
	if err := c.waitSeeded(ctx, e); err != nil {
		return nil, err
	}
	if e.err != nil {
		return nil, e.err
	}
	return e, nil
}

// apply installs a list from the source. force skips the empty protection.
func (c *Cache) apply(service string, e *cacheEntry, list []Instance, force bool) {
	u := c.keep(service, list)
	var release func() // the subscription's stop, once the name is forgotten
	e.mu.Lock()
	defer func() {
		e.mu.Unlock()
		if release != nil {
			release()
		}
	}()
	old := e.snap.Load()
	if len(u) == 0 && old != nil && len(*old) > 0 && c.protect && !force {
		n := c.refused.Add(1)
		c.logger.Warn("graylb: refused an update that would empty the instance list; keeping the last good list",
			"service", service, "kept", len(*old), "refused", n)
		if c.grace > 0 && e.recheck == nil {
			e.recheck = time.AfterFunc(c.grace, func() { c.recheckEmpty(service, e) })
		}
		return
	}
	if e.recheck != nil {
		e.recheck.Stop()
		e.recheck = nil
	}
	if !force && old != nil && c.protect {
		if wait, refill, ok := c.holdFor(); ok && c.suddenShrink(*old, u, refill) {
			n := c.held.Add(1)
			if e.hold != nil {
				e.hold.pending = &u
			} else {
				e.hold = &heldShrink{pending: &u, since: time.Now()}
				e.hold.timer = time.AfterFunc(wait, func() { c.settled(service, e) })
				c.logger.Warn("graylb: holding a sudden shrink of the instance list while the registry settles",
					"service", service, "from", len(*old), "to", len(u), "refill", refill, "held", n)
			}
			return
		}
	}
	if e.hold != nil {
		e.hold.timer.Stop()
		e.hold = nil
	}
	e.snap.Store(&u)
	c.applied.Add(1)
	e.delivering.Store(true)
	for _, fn := range e.watchers.Snapshot() {
		fn(u)
	}
	e.delivering.Store(false)
	if e.forgotten.Load() { // a watcher's stop forgot the name meanwhile
		release = e.releaseLocked()
	}
}

// Close stops every subscription and cancels the first queries in flight;
// callers waiting on one get ErrClosed. It does not wait for the source's
// calls to return: a seed that ends after Close stops its own
// subscription. Later calls return ErrClosed.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	entries := c.entries
	c.entries = nil
	c.mu.Unlock()
	c.endLife()
	for _, e := range entries {
		e.mu.Lock()
		stop := e.releaseLocked()
		e.watchers.Clear()
		e.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
	return nil
}
