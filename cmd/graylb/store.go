package main

import (
	"context"
	"errors"
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
	put(ctx context.Context, prev document, data []byte) error
	// close releases connections.
	close() error
}
