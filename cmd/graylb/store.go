package main

import (
	"context"
	"errors"
	"time"
)

// errConflict: the rules changed between the read a write was based on and
// the write; nothing was written.
var errConflict = errors.New("the rules changed since they were read (a concurrent write); nothing was written")

// document is what a store held at one read.
type document struct {
	// data is the rule document: the stored JSON for the document layouts,
	// the JSON the three-key layout maps onto (see redisStore).
	data []byte
	// exists: the document (or any key of the three-key layout) exists.
	exists bool
	// rev identifies what was read, for compare-and-set: the md5 of a Nacos
	// config (its casMd5), the raw values of Redis keys.
	rev string
}

// store is where the rules live: Nacos config or Redis.
type store interface {
	// describe names the place, without credentials.
	describe() string
	// get reads the document as it is now.
	get(ctx context.Context) (document, error)
	// put writes data when the store still holds what prev was read from;
	// otherwise it writes nothing and returns an error wrapping errConflict.
	// A store without an atomic compare-and-set (r-nacos ignores casMd5)
	// checks before writing, which leaves a window: the write is
	// verified by reading it back (see settle).
	put(ctx context.Context, prev document, data []byte) error
	// settle is how long after a write a read-back is taken to verify it:
	// long enough that a concurrent writer whose check passed before this
	// write landed has landed its own write too (and that the store's
	// reads show this write). Zero for an atomic compare-and-set.
	settle() time.Duration
	// aux is the side item called name beside the rules (the rollout's
	// lease): a Nacos config or a Redis key of its own.
	aux(name string) auxStore
	// close releases connections.
	close() error
}

// auxStore is a small document beside the rules, written with the same
// compare-and-set as the rules.
type auxStore interface {
	describe() string
	get(ctx context.Context) (document, error)
	// put writes data when the item still holds prev; ttl > 0 makes a
	// store with expiring keys (Redis) drop it ttl after this write.
	put(ctx context.Context, prev document, data []byte, ttl time.Duration) error
	// remove deletes the item when it still holds prev.
	remove(ctx context.Context, prev document) error
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
