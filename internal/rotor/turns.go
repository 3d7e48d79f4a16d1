package rotor

import (
	"math/rand/v2"
	"sync/atomic"
)

// clashesToShard is how many lost compare-and-swaps on a Turns' single
// counter make it take a rotor: a lost one means another goroutine took a
// turn between this one's read and its write, which happens when picks
// run at once on several cores (a goroutine preempted in that window on
// one core loses one now and then, far fewer).
const clashesToShard = 16

// Turns hands out the turns of a round-robin walk: from one counter word
// while picks do not contend, from a rotor once they do. The single
// counter is read and advanced by compare-and-swap, so contention shows as
// lost swaps; after clashesToShard of them the turns take a rotor (2 KiB,
// allocated once, by the pick that saw the last clash) and keep it, and
// the counter word is marked (ShardedMark) so that no pick writes it
// again (but the few that lost a swap just before, which count once more
// past the mark and take their turn from that). A small or rarely picked
// walk thus costs one counter word, and a walk taken on several cores at
// once gets the sharded counters it needs after a few contended picks.
// Every turn is correct from either source; the switch only changes which
// counter the next turns come from.
//
// A Turns is 24 bytes; its owner keeps it in an object that fills a cache
// line of its own, so that the counter's writes slow down nothing but its
// own walk, and once sharded the line is only read. The zero value counts
// from 0.
type Turns struct {
	one   atomic.Uint64 // the turn counter, or ShardedMark and up
	hot   atomic.Pointer[rotor]
	clash atomic.Uint32
	// N is free for the owner (a round robin keeps its list's length
	// there, filling the word Turns would otherwise leave as padding).
	N uint32
}

// ShardedMark marks a Turns' counter word once its rotor is in use: a
// counter, started below 2^37, never reaches it by counting.
const ShardedMark = 1 << 63

// Init starts the counter at a random offset below span.
func (t *Turns) Init(span uint64) {
	t.one.Store(rand.Uint64N(max(span, 1)))
}

// Adopt starts t where o stands (its counter and N) for a walk that takes
// over from o before any turn of o's was taken: o must not be in use.
func (t *Turns) Adopt(o *Turns) {
	t.N = o.N
	t.one.Store(o.one.Load())
}

// Next returns the next turn; a rotor it takes starts its counters below
// span.
func (t *Turns) Next(span uint64) uint64 {
	if old, ok := t.TryOne(); ok {
		return old
	}
	return t.Contended(span)
}

// TryOne takes the next turn from the single counter word: false when the
// word is marked sharded or another goroutine took a turn at the same
// moment (then the caller calls Contended). It is Next's fast path, small
// enough to inline into a pick.
func (t *Turns) TryOne() (uint64, bool) {
	old := t.one.Load()
	return old, old < ShardedMark && t.one.CompareAndSwap(old, old+1)
}

// Contended is Next once TryOne failed: a swap was lost or the rotor is in
// use.
func (t *Turns) Contended(span uint64) uint64 {
	if r := t.hot.Load(); r != nil {
		return r.next()
	}
	if t.clash.Add(1) < clashesToShard {
		return t.one.Add(1) - 1
	}
	t.hot.CompareAndSwap(nil, newRotor(span))
	t.one.Store(ShardedMark)
	return t.hot.Load().next()
}

// Sharded reports whether the turns come from a rotor.
func (t *Turns) Sharded() bool { return t.hot.Load() != nil }

// Word returns the single counter word as it stands: the next turn while
// not sharded, ShardedMark or a little above once sharded (tests read it
// to see that a sharded Turns no longer writes it).
func (t *Turns) Word() uint64 { return t.one.Load() }
