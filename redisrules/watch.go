package redisrules

import (
	"context"
	"crypto/sha256"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/graylb/graylb"
)

// Watch follows the keys and calls fn with each new valid rule set until
// stop is called (or Close). It reads the keys at once, then every poll
// interval and, with keyspace notifications, on each change. fn is called
// from one goroutine, never concurrently with itself, and only with rules
// that differ from the last ones delivered, or from the ones the last Load
// returned. Watch does no I/O before returning: with Redis down it succeeds,
// and the current rules stay in force until Redis answers. After stop
// returns, fn is not called again; stop must not be called from fn.
func (s *RuleSource) Watch(fn func(graylb.Rules)) (stop func(), err error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil watch function", ErrInvalidOption)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{s: s, fn: fn, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("redisrules: %w", graylb.ErrClosed)
	}
	if s.loaded != nil {
		w.sum, w.haveSum = s.loaded.sum, true
		w.delivered = &s.loaded.rules
	}
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	go w.run(ctx)
	return w.stop, nil
}

// watcher is one Watch: its goroutine and what it delivered last.
type watcher struct {
	s      *RuleSource
	fn     func(graylb.Rules)
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	sum       [sha256.Size]byte // of the last content read
	haveSum   bool
	delivered *graylb.Rules // the last rules delivered (or loaded)
}

func (w *watcher) stop() {
	w.once.Do(func() {
		w.cancel()
		<-w.done
		w.s.mu.Lock()
		delete(w.s.watchers, w)
		w.s.mu.Unlock()
	})
}

// After a subscription broke (its node died, failed over, or restarts), or
// a read failed while notifications were followed, the watcher reads and
// sets up again every retryInterval (or the poll interval, when shorter)
// until a read succeeds and notifications follow again, for at most
// retryWindow: a change made as soon as a Cluster replica has taken over
// from a dead master (after cluster-node-timeout, 15 s by default, and an
// election), or notified while the keys' slot migrated (the transaction that
// reads the keys cannot follow an ASK redirection), applies then, not at the
// next poll. While it retries, each read on a Cluster first checks that the
// master the client's slot map names for the keys answers (checkMaster): the
// map may still name the dead master (the read after the subscription broke;
// a map read during setup from a node that has not learnt of the promotion
// yet), and a transaction sent to it blocks for the client's read timeout,
// which a promotion made meanwhile waits out.
const (
	retryInterval = 50 * time.Millisecond
	retryWindow   = 30 * time.Second
)

func (w *watcher) run(ctx context.Context) {
	defer close(w.done)
	n := newNotifier(w.s)
	defer n.close()
	tick := time.NewTicker(w.s.cfg.interval)
	defer tick.Stop()
	retry := time.NewTimer(retryInterval)
	retry.Stop()
	defer retry.Stop()
	setup := true       // consider notifications after the next successful read
	byTick := false     // the coming read is a poll's, no notification announced it
	var hurry time.Time // while setup is due after a subscription broke: retry until then
	gone := false       // a key's deletion was notified: the slot map tells whether it migrated
	migrating := false  // read the slot map at each read until the master it names serves the keys
	for {
		ok, changed := w.poll(ctx, !hurry.IsZero())
		if ctx.Err() != nil {
			return
		}
		if gone && ok && n.cluster() {
			// Deleted on its node: by a client, or by MIGRATE, which moves
			// the keys to another node ahead of their slot. Whether the
			// content changed tells neither: a change made meanwhile on
			// the new node may be in this read. The slot map tells: read
			// it until the master it names serves the keys' slot. When
			// that is another master, maybe one not subscribed to (one
			// that held no slot), setup follows it.
			migrating = true
			if hurry.IsZero() {
				hurry = time.Now().Add(retryWindow)
			}
		}
		gone = false
		switch {
		case !ok:
			setup = true // the server may come back with other settings
			if n.following() && hurry.IsZero() {
				// A notified change that could not be read (a master just
				// died, the keys' slot is migrating) is read on a retry.
				hurry = time.Now().Add(retryWindow)
			}
		case changed && byTick && n.following():
			// A change no notification announced: the keys may be
			// published by a node not subscribed to (a new master).
			w.s.cfg.logger.Debug("redisrules: a poll found a change no keyspace notification announced; checking the subscriptions", "keys", w.s.Keys())
			setup = true
		}
		due := setup
		if ok && !due {
			var settled bool
			due, settled = n.moved(ctx, migrating)
			if settled && !due {
				migrating = false // the keys' master is the one followed
			}
		}
		if ok && due {
			migrating = false
			setup = !n.setup(ctx)
			if n.unsettled {
				// The slot map named a master that redirects the keys:
				// read it again soon, not at the next poll.
				migrating = true
				if hurry.IsZero() {
					hurry = time.Now().Add(retryWindow)
				}
			}
		}
		if !setup && !migrating {
			hurry = time.Time{}
		} else if time.Now().Before(hurry) {
			retry.Reset(min(retryInterval, w.s.cfg.interval))
		} else {
			migrating = false
		}
		byTick = false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			byTick = true
		case <-retry.C:
		case <-n.wake: // a burst of notifications is one signal: one read
			select {
			case <-n.gone:
				gone = true
			default:
			}
		case <-n.broken:
			setup = true // read first: notifications may have been lost
			if hurry.IsZero() {
				hurry = time.Now().Add(retryWindow)
			}
		}
		if !retry.Stop() {
			select { // a fire not received (Go before 1.23 keeps it)
			case <-retry.C:
			default:
			}
		}
	}
}

// poll reads the keys once and delivers what changed. It reports whether
// Redis answered and whether the content differed from the last read.
// With check set, the keys' master is checked first (see read).
func (w *watcher) poll(ctx context.Context, check bool) (ok, changed bool) {
	c, err := w.s.read(ctx, check)
	if err != nil {
		if ctx.Err() == nil {
			w.s.outage(err, true)
		}
		return false, false
	}
	w.s.reachable()
	if w.haveSum && c.sum == w.sum {
		return true, false // unchanged data rebuilds nothing
	}
	first := !w.haveSum
	w.sum, w.haveSum = c.sum, true
	w.s.warn(c.warnings)
	if c.err != nil {
		w.s.refuse(c.sum, c.err, true)
		return true, !first
	}
	w.s.accept()
	if c.missing {
		w.s.cfg.logger.Warn("redisrules: rule document missing; the current rules stay in force", "keys", w.s.Keys())
		return true, !first
	}
	if w.delivered != nil && reflect.DeepEqual(*w.delivered, c.rules) {
		return true, !first
	}
	w.delivered = &c.rules
	w.fn(clone(c.rules)) // fn may keep or change its copy
	return true, !first
}

func clone(r graylb.Rules) graylb.Rules {
	r.GrayUsers = slices.Clone(r.GrayUsers)
	r.GrayAddresses = slices.Clone(r.GrayAddresses)
	if r.Enabled != nil {
		on := *r.Enabled
		r.Enabled = &on
	}
	return r
}
