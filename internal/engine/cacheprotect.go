package engine

import (
	"context"
	"time"
)

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

// heldShrink is a sudden shrink the Cache holds (see
// WithShrinkProtection): kept apart from cacheEntry, since few entries
// ever hold one.
type heldShrink struct {
	pending *[]Instance // the newest held list
	timer   *time.Timer // ends the hold
	since   time.Time   // when the hold began
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

// recheckEmpty asks the source again once the grace period has passed and
// applies what it answers. While the source refills, that answer is an
// update like any other: an empty one is refused again (and asked again
// after another grace period), one that lost a kind is held; once settled,
// it is applied whatever it holds.
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
	if _, refill, _ := c.holdFor(); refill {
		c.apply(service, e, list, false)
		return
	}
	if !anyKept(list) {
		c.logger.Warn("graylb: service is still empty after the grace period; accepting the empty list", "service", service)
	}
	c.apply(service, e, list, true)
}
