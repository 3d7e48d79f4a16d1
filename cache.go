package graylb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb/internal/fanout"
)

// DefaultEmptyGrace is how long the Cache holds the last good list after
// the source reports an empty one, before it asks the source again.
const DefaultEmptyGrace = 30 * time.Second

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
type Cache struct {
	src     Supplier
	protect bool
	grace   time.Duration
	logger  *slog.Logger

	mu      sync.Mutex
	closed  bool
	entries map[string]*cacheEntry

	shrinkKeep float64
	settle     time.Duration
	partition  func(Instance) string

	seedRetry time.Duration
	failed    map[string]seedFailure // guarded by mu; at most maxSeedFailures
	// failedOrder holds the names in failed in the order they came, a ring
	// once full; failedNext is the oldest.
	failedOrder []string
	failedNext  int

	refused atomic.Uint64
	applied atomic.Uint64
	held    atomic.Uint64
}

// CacheOption configures a Cache.
type CacheOption func(*Cache)

// WithEmptyProtection turns empty-update protection on or off (default on).
func WithEmptyProtection(on bool) CacheOption { return func(c *Cache) { c.protect = on } }

// WithEmptyGrace sets the grace period of empty-update protection.
func WithEmptyGrace(d time.Duration) CacheOption { return func(c *Cache) { c.grace = d } }

// DefaultSettle is how long the Cache holds a sudden shrink (see Cache):
// long enough for Nacos clients to reconnect and register again after a
// server restart or a cluster node's loss (5-7 s measured with r-nacos).
const DefaultSettle = 10 * time.Second

// WithShrinkProtection also holds an update that keeps less than keep
// (0-1; default 0, off) of the last good list, for up to settle (default
// DefaultSettle). Off by default: instances that deregister before they
// shut down should stop getting traffic at once.
func WithShrinkProtection(keep float64, settle time.Duration) CacheOption {
	return func(c *Cache) { c.shrinkKeep, c.settle = keep, settle }
}

// Refiller is implemented by a Supplier whose registry can lose its
// instance lists and fill them again as its clients reconnect and register
// anew (a restarted registry server, a lost cluster node, a client that
// reconnected). While a refill is under way the lists it hands over may
// lack instances that are alive and only re-registering.
//
// RefillUntil returns the end of the current refill window; a zero or past
// time means the registry is settled and every list reflects deliberate
// registrations and deregistrations. It must be cheap and safe for
// concurrent use; the Cache calls it on list changes only.
type Refiller interface {
	RefillUntil() time.Time
}

// maxRefillHold bounds how long one sudden shrink is held while a
// Refiller keeps extending its refill window, in multiples of the settle
// period.
const maxRefillHold = 3

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
	return func(c *Cache) { c.partition = key }
}

// DefaultSeedRetry is how long the Cache remembers that the first query
// of a service failed (see WithSeedRetry).
const DefaultSeedRetry = time.Second

// maxSeedFailures bounds the failed first queries the Cache remembers.
const maxSeedFailures = 4096

type seedFailure struct {
	err   error
	until time.Time
}

// WithSeedRetry sets how long a failed first query of a service is
// remembered (default DefaultSeedRetry): calls for that service within the
// period return the same error without asking the source again; the first
// call after it asks again, so the Cache recovers on its own. Zero or less
// asks the source on every call.
func WithSeedRetry(d time.Duration) CacheOption { return func(c *Cache) { c.seedRetry = d } }

// WithCacheLogger sets the Cache's logger (default slog.Default()).
func WithCacheLogger(l *slog.Logger) CacheOption {
	return func(c *Cache) {
		if l != nil {
			c.logger = l
		}
	}
}

// NewCache returns a Cache over src.
func NewCache(src Supplier, opts ...CacheOption) (*Cache, error) {
	if src == nil {
		return nil, errors.New("graylb: nil supplier")
	}
	c := &Cache{src: src, protect: true, grace: DefaultEmptyGrace, logger: slog.Default(), entries: map[string]*cacheEntry{},
		settle: DefaultSettle, seedRetry: DefaultSeedRetry, failed: map[string]seedFailure{}}
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

// heldShrink is a sudden shrink the Cache holds (see WithSettle): kept
// apart from cacheEntry, since few entries ever hold one.
type heldShrink struct {
	pending *[]Instance // the newest held list
	timer   *time.Timer // ends the hold
	since   time.Time   // when the hold began
}

// seededOK reports whether e is seeded, without waiting.
func (e *cacheEntry) seededOK() bool { return e.seeded.Load() }

// waitSeeded waits until e is seeded or ctx is done; a seeded entry
// answers whatever ctx says (only waiting is cut short).
func (c *Cache) waitSeeded(ctx context.Context, e *cacheEntry) error {
	if e.seeded.Load() {
		return nil
	}
	c.mu.Lock()
	if e.seeded.Load() {
		c.mu.Unlock()
		return nil
	}
	if e.wait == nil {
		e.wait = make(chan struct{})
	}
	ch := e.wait
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		// (A select over both, when both are ready, picks one at random.)
		if e.seeded.Load() {
			return nil
		}
		return ctx.Err()
	}
}

// markSeeded marks e seeded and wakes its waiters.
func (c *Cache) markSeeded(e *cacheEntry) {
	c.mu.Lock()
	e.seeded.Store(true)
	ch := e.wait
	c.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// CacheStats counts what the Cache did.
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

// seed subscribes to the source and queries it once.
func (c *Cache) seed(ctx context.Context, service string, e *cacheEntry) {
	defer c.markSeeded(e)
	stop, werr := c.src.Watch(service, func(list []Instance) { c.apply(service, e, list, false) })
	list, qerr := c.src.Instances(ctx, service)
	if qerr != nil {
		if stop != nil {
			stop()
		}
		e.err = fmt.Errorf("graylb: instances of %q: %w", service, qerr)
		c.mu.Lock()
		if c.entries[service] == e {
			delete(c.entries, service)
		}
		// The caller's own deadline or cancellation says nothing about the
		// source: only the source's failures are remembered.
		if c.seedRetry > 0 && ctx.Err() == nil && c.failed != nil {
			c.rememberFailure(service, e.err)
		}
		c.mu.Unlock()
		return
	}
	if werr != nil {
		c.logger.Warn("graylb: watch failed; serving the seeded list without updates", "service", service, "err", werr)
	}
	e.mu.Lock()
	e.stop = stop
	if e.snap.Load() == nil { // a push may already have arrived (apply counted it)
		u := c.keep(service, list)
		e.snap.Store(&u)
		if len(u) > 0 {
			// The first list counts as applied; an empty one (a name with
			// no instance, maybe never registered) installs nothing.
			c.applied.Add(1)
		}
	}
	e.mu.Unlock()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed && stop != nil { // Close ran while we seeded
		stop()
	}
}

// rememberFailure records a failed first query; c.mu is held. The map
// never holds more than maxSeedFailures names: past that the oldest
// recorded name goes, in O(1), so a flood of unknown names costs each pick
// nothing more.
func (c *Cache) rememberFailure(service string, err error) {
	if _, ok := c.failed[service]; !ok {
		if len(c.failedOrder) < maxSeedFailures {
			c.failedOrder = append(c.failedOrder, service)
		} else {
			delete(c.failed, c.failedOrder[c.failedNext])
			c.failedOrder[c.failedNext] = service
			c.failedNext = (c.failedNext + 1) % maxSeedFailures
		}
	}
	c.failed[service] = seedFailure{err: err, until: time.Now().Add(c.seedRetry)}
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

// keep returns the usable instances of list with a valid host and port,
// in order; it drops each usable one that is invalid with a log line. When
// it keeps every instance it returns list itself (a Supplier's lists are
// read-only once handed over), capped at its length: the Cache holds no
// second copy of a list.
func (c *Cache) keep(service string, list []Instance) []Instance {
	all := true
	for i := range list {
		if !list[i].Usable() || list[i].validateEndpoint() != nil {
			all = false
			break
		}
	}
	if all {
		return list[:len(list):len(list)]
	}
	out := make([]Instance, 0, len(list))
	for _, in := range list {
		if !in.Usable() {
			continue
		}
		if err := in.validateEndpoint(); err != nil {
			c.logger.Warn("graylb: dropped an invalid instance from the supplier", "service", service, "err", err)
			continue
		}
		out = append(out, in)
	}
	return out
}

// anyKept reports whether keep would keep an instance of list.
func anyKept(list []Instance) bool {
	for _, in := range list {
		if in.Usable() && in.validateEndpoint() == nil {
			return true
		}
	}
	return false
}

// holdFor reports whether a sudden shrink may be held now, for how long,
// and whether the source is refilling (then every partition is guarded).
func (c *Cache) holdFor() (wait time.Duration, refill, ok bool) {
	if c.settle <= 0 {
		return 0, false, false
	}
	r, isRefiller := c.src.(Refiller)
	if !isRefiller {
		return c.settle, false, true
	}
	wait = time.Until(r.RefillUntil())
	if wait <= 0 {
		return 0, false, false
	}
	return wait, true, true
}

// suddenShrink reports whether next keeps less than shrinkKeep of old, or
// loses every instance of one of old's guarded partitions (all of them,
// the empty key included, when all is set). Such lists are what a registry
// shows while it refills after a restart, one client at a time.
func (c *Cache) suddenShrink(old, next []Instance, all bool) bool {
	if len(old) == 0 {
		return false
	}
	if c.shrinkKeep > 0 && float64(len(next)) < c.shrinkKeep*float64(len(old)) {
		return true
	}
	if c.partition == nil {
		return false
	}
	// A guarded partition lost every instance, and those instances left
	// the list (a kind flip keeps its address and is applied at once).
	have := map[string]bool{}
	for _, in := range next {
		have[c.partition(in)] = true
	}
	missing := false
	for _, in := range old {
		if k := c.partition(in); (all || k != "") && !have[k] {
			missing = true
			break
		}
	}
	if !missing { // the usual case: no address compared
		return false
	}
	addrs := make(map[addrKey]bool, len(next)) // canonical: a respelt address is the same instance
	for _, in := range next {
		addrs[endpointOf(in)] = true
	}
	lost := map[string]bool{}
	for _, in := range old {
		k := c.partition(in)
		if (!all && k == "") || have[k] {
			continue
		}
		if addrs[endpointOf(in)] {
			lost[k] = false // it changed partition: not a disappearance
		} else if _, seen := lost[k]; !seen {
			lost[k] = true
		}
	}
	for _, vanished := range lost {
		if vanished {
			return true
		}
	}
	return false
}

// settled applies the newest held list once the hold is over: the settle
// period, or the source's refill window. A refill window that was extended
// meanwhile extends the hold, up to maxRefillHold settle periods in all.
func (c *Cache) settled(service string, e *cacheEntry) {
	e.mu.Lock()
	if e.hold == nil { // applied or stopped meanwhile
		e.mu.Unlock()
		return
	}
	if r, ok := c.src.(Refiller); ok {
		limit := e.hold.since.Add(maxRefillHold * c.settle)
		if until := r.RefillUntil(); until.After(time.Now()) && time.Now().Before(limit) {
			if until.After(limit) {
				until = limit
			}
			e.hold.timer = time.AfterFunc(time.Until(until), func() { c.settled(service, e) })
			e.mu.Unlock()
			return
		}
	}
	p := e.hold.pending
	e.hold = nil
	e.mu.Unlock()
	if p != nil {
		c.apply(service, e, *p, true)
	}
}

// recheckEmpty asks the source again once the grace period has passed.
func (c *Cache) recheckEmpty(service string, e *cacheEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.src.Instances(ctx, service)
	e.mu.Lock()
	e.recheck = nil
	e.mu.Unlock()
	if err != nil {
		c.logger.Warn("graylb: re-query after an empty update failed; keeping the last good list", "service", service, "err", err)
		return
	}
	if !anyKept(list) {
		c.logger.Warn("graylb: service is still empty after the grace period; accepting the empty list", "service", service)
	}
	c.apply(service, e, list, true)
}

// Close stops every subscription. Later calls return ErrClosed.
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
	for _, e := range entries {
		_ = c.waitSeeded(context.Background(), e)
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
