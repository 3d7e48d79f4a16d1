// Package rotor hands out the turns of a round-robin walk without one
// counter every core writes: one counter word while the turns do not
// contend, a few counters on cache lines of their own, chosen by the
// calling goroutine's stack, once they do.
//
// Contract: every turn Turns.Next (or TryOne, else Contended) returns is
// a valid turn of the walk: taken from a counter that only ever counts up
// (wrapping at 2^64), so a goroutine that keeps to one counter sees a
// strict rotation; counters start at random offsets below the span given.
// Turns never blocks, never allocates but once (the sharded counters,
// about 2 KiB, taken by the pick that saw the last clash), and is safe for
// concurrent use. Which counter a turn comes from only spreads contention;
// it never changes whether a turn is correct.
//
// Exported identifiers are for the engine only.
package rotor

import (
	"math/rand/v2"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
)

// counter is an atomic counter alone on its cache line, with a line
// before it.
type counter struct {
	_ [cacheline.Size]byte
	n cacheline.Uint64
}

// rotorShards is how many counters a rotor spreads its turns over.
const (
	rotorShardBits = 4
	rotorShards    = 1 << rotorShardBits
)

// rotor hands out turns for a round-robin walk without a counter shared by
// every core: each turn comes from one of a few counters, each on its own
// cache line and started at its own random offset, chosen by the calling
// goroutine's stack address. A goroutine that picks from one place in its
// code keeps to one counter while its stack stays where it is, so it sees a
// strict rotation; goroutines running on different cores mostly use
// different counters, so concurrent picks do not slow each other down (a
// single shared counter costs 2-6x per pick when two cores pick at once).
// The choice only spreads contention: any counter gives a correct turn.
//
// Two goroutines whose stacks map to one counter would contend on it for as
// long as their stacks stay where they are: a turn is taken by
// compare-and-swap, and after clashesToRehash lost swaps the rotor draws a
// new mapping of stacks to counters (a multiplier of its own), so that
// goroutines picking at once on different cores are soon apart again.
//
// A rotor is about 2 KiB; Turns takes one only once its turns contend, so
// a walk taken by one goroutine at a time, or never, does not pay for it.
type rotor struct {
	shards [rotorShards]counter
	// mix is 0 (the stack address folded, see shardOfCaller) until the
	// first rehash, then an odd multiplier; read on every turn, written
	// once per rehash: a line of its own.
	mix cacheline.Uint64
	// clash counts lost swaps, written on each: a line of its own, apart
	// from mix.
	clash cacheline.Uint32
}

// clashesToRehash is how many lost compare-and-swaps on a rotor's counters
// make it draw a new mapping of stacks to counters.
const clashesToRehash = 32

func newRotor(n uint64) *rotor {
	r := &rotor{}
	r.start(n)
	return r
}

// start sets every counter at its own random offset below n.
func (r *rotor) start(n uint64) {
	for i := range r.shards {
		r.shards[i].n.Store(rand.Uint64N(max(n, 1)))
	}
}

// next returns the next turn.
func (r *rotor) next() uint64 {
	c := &r.shards[shardOfCaller(r.mix.Load())].n
	if old := c.Load(); c.CompareAndSwap(old, old+1) {
		return old
	}
	// Another core took a turn from this counter at the same moment.
	if r.clash.Add(1)%clashesToRehash == 0 {
		r.mix.Store(rand.Uint64() | 1)
	}
	return c.Add(1) - 1
}

// shardOfCaller maps the calling goroutine's stack to a shard. With mix 0,
// the stack address in units of 2 KiB (the smallest goroutine stack, so
// two live goroutines differ there), bits 11 to 26 of the address folded
// by XOR into 4: goroutines started together get nearby stacks, which
// folding mostly maps to different shards (neighbours differ in the low
// group), and stacks far apart share a shard about one time in 16. With an
// odd mix, the top bits of the address times mix: a mapping drawn at
// random, so two stacks that shared a shard under one mix share one under
// the next about one time in 16.
func shardOfCaller(mix uint64) uint64 {
	var here byte
	x := uint64(uintptr(unsafe.Pointer(&here))) >> 11
	if mix != 0 {
		return (x * mix) >> (64 - rotorShardBits)
	}
	return (x ^ x>>4 ^ x>>8 ^ x>>12) & (rotorShards - 1)
}
