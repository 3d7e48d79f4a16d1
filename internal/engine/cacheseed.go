package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/graylb/graylb/internal/ring"
)

// DefaultSeedRetry is graylb.DefaultSeedRetry.
const DefaultSeedRetry = time.Second

// maxSeedFailures bounds the failed first queries the Cache remembers.
const maxSeedFailures = 4096

type seedFailure struct {
	err   error
	until time.Time
}

// seededOK reports whether e is seeded, without waiting.
func (e *cacheEntry) seededOK() bool { return e.seeded.Load() }

// waitSeeded waits until e is seeded, ctx is done or the Cache closes
// (ErrClosed); a seeded entry answers whatever ctx says (only waiting is
// cut short).
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
	case <-c.life.Done():
	}
	// (A select over several, when several are ready, picks one at random.)
	if e.seeded.Load() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrClosed
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

// seed subscribes to the source and queries it once, within ctx and the
// Cache's life (Close cancels the query).
func (c *Cache) seed(ctx context.Context, service string, e *cacheEntry) {
	defer c.markSeeded(e)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
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
		if c.seedRetry > 0 && ctx.Err() == nil && !c.closed && c.failed != nil {
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
	if closed { // Close ran while we seeded: whichever of the two takes e.stop first stops it
		e.mu.Lock()
		stop := e.releaseLocked()
		e.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
}

// rememberFailure records a failed first query; c.mu is held. The map
// never holds more than maxSeedFailures names: past that the oldest
// recorded name goes, in O(1), so a flood of unknown names costs each pick
// nothing more.
func (c *Cache) rememberFailure(service string, err error) {
	if _, ok := c.failed[service]; !ok {
		if c.failedOrder.Cap() == 0 {
			c.failedOrder = ring.New[string](maxSeedFailures)
		}
		if oldest, full := c.failedOrder.Push(service); full {
			delete(c.failed, oldest)
		}
	}
	c.failed[service] = seedFailure{err: err, until: time.Now().Add(c.seedRetry)}
}
