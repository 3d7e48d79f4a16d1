package engine

import (
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/modulus"
)

// Policy builds a Picker over one candidate list. NewPicker runs once per
// list change; the Picker runs on every pick.
type Policy interface {
	NewPicker(instances []Instance) Picker
}

// Picker chooses among a fixed, non-empty candidate list.
type Picker interface {
	// Next returns an index into the list it was built over. It must be
	// safe for concurrent use, not block, and not allocate.
	Next() int
}

// StatsPolicy is a Policy whose pickers read the candidates' Stats (calls
// in flight, latency), such as P2C. When the LoadBalancer keeps Stats it
// builds each leaf's picker with NewStatsPicker, stats[i] being the Stats
// of instances[i]; otherwise with NewPicker.
type StatsPolicy interface {
	Policy
	NewStatsPicker(instances []Instance, stats []*Stats) Picker
}

// PolicyFunc adapts a function to a Policy.
type PolicyFunc func(instances []Instance) Picker

// NewPicker calls f.
func (f PolicyFunc) NewPicker(instances []Instance) Picker { return f(instances) }

// RoundRobin returns the round-robin policy (the default): each candidate
// in turn, from a random starting point. A picker keeps one counter (one
// global rotation) until its picks contend, on several cores at once;
// from then on each core keeps its own rotation (see turns and rotor), so
// concurrent picks do not contend on one counter: the share of every
// candidate stays even, but picks on different cores are no longer
// interleaved in one global order. So a candidate list picked by one
// goroutine at a time, or rarely, costs one counter word, not the sharded
// counters (2 KiB). StrictRoundRobin keeps a single global order at the
// cost of that contention. It ignores weights (WeightedRoundRobin honours
// them).
func RoundRobin() Policy { return PolicyFunc(newRoundRobin) }

// StrictRoundRobin returns round robin over one shared atomic counter, as
// grpc-go's round_robin and Spring Cloud LoadBalancer do: one global order
// of turns, but two cores picking at once slow each other down. It ignores
// weights.
func StrictRoundRobin() Policy { return PolicyFunc(newStrictRoundRobin) }

// Random returns the uniform random policy: every
// candidate equally likely, weights ignored. It keeps no shared state, so
// concurrent picks do not contend.
func Random() Policy { return PolicyFunc(newRandom) }

// WeightedRoundRobin returns the smooth weighted round-robin policy: each
// candidate gets a share of the picks proportional to its (Nacos) weight,
// fractions included (1 : 1.5 is 2 : 3), spread evenly over a precomputed
// schedule. A weight of 0, below 0 or NaN gets nothing; if no weight is
// positive, the policy is plain round robin.
//
// Accuracy, over whole cycles of the schedule: every candidate's share is
// within 0.5 % (relative) of weight/total, except where the slot limit
// binds. Every positive weight is picked at least once per cycle of the
// schedule's first level, which has at most L = max(65536, 8n) slots for n
// candidates, so a share below 1/L is raised to exactly 1/L (0.01 next to
// 10 000 gets 1/65536 instead of 1/1000001). When z shares are raised, the
// others are within 0.5 % + z/L of theirs: 1.1 % at 1 000 and 7.9 % at
// 10 000 candidates with weights spread log-uniformly from 0.01 to 10 000,
// within 1 % for 10 000 weights spread uniformly over the same range.
//
// Smoothness: each level of the schedule spreads every candidate's slots
// evenly over its cycle, so a candidate's turns are spaced out, not
// bunched. As with RoundRobin, one counter walks the schedule until
// picks contend, then each core walks it on its own counter.
//
// Cost: a pick is O(1) (one counter, one slot, and a slot of a deeper level
// on a small share of picks; at most four levels) and does not allocate. A
// build is O(n + slots). The schedule has at most max(65536, 8n) + 24n
// slots of 4 bytes: at most 1.28 MB at 10 000 candidates (0.85 MB with
// random weights, 40 KB with equal ones); simple ratios take a few slots.
func WeightedRoundRobin() Policy { return PolicyFunc(newWeighted) }

// counter is an atomic counter alone on its cache line.
type counter struct {
	_ [64]byte
	n atomic.Uint64
	_ [56]byte
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
// A rotor is about 2 KiB; a picker takes one only once its picks contend
// (see turns), so a leaf picked by one goroutine at a time, or never, does
// not pay for it.
type rotor struct {
	shards [rotorShards]counter
	// mix is 0 (the stack address folded, see shardOfCaller) until the
	// first rehash, then an odd multiplier; read on every turn, written
	// once per rehash: a line of its own.
	mix atomic.Uint64
	_   [cacheline.Size - 8]byte
	// clash counts lost swaps, written on each: a line of its own, apart
	// from mix.
	clash atomic.Uint32
	_     [cacheline.Size - 4]byte
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

// clashesToShard is how many lost compare-and-swaps on a turns' single
// counter make it take a rotor: a lost one means another goroutine took a
// turn between this one's read and its write, which happens when picks
// run at once on several cores (a goroutine preempted in that window on
// one core loses one now and then, far fewer).
const clashesToShard = 16

// turns hands out the turns of a round-robin walk: from one counter word
// while picks do not contend, from a rotor once they do. The single
// counter is read and advanced by compare-and-swap, so contention shows as
// lost swaps; after clashesToShard of them the turns take a rotor (2 KiB,
// allocated once, by the pick that saw the last clash) and keep it, and
// the counter word is marked (turnsSharded) so that no pick writes it
// again (but the few that lost a swap just before, which count once more
// past the mark and take their turn from that). A small or rarely picked leaf thus costs one counter word, and a
// leaf picked on several cores at once gets the sharded counters it needs
// after a few contended picks. Every turn is correct from either source;
// the switch only changes which counter the next turns come from.
//
// A turns lives in its picker's object, which fills a cache line of its
// own (see package cacheline): the counter's writes slow down nothing but the
// picks of its own leaf, and once sharded the line is only read.
type turns struct {
	one   atomic.Uint64 // the turn counter, or turnsSharded and up
	hot   atomic.Pointer[rotor]
	clash atomic.Uint32
	n     uint32 // a round robin's list length (its owner's to use)
}

// turnsSharded marks a turns' counter word once its rotor is in use: a
// counter, started below 2^37, never reaches it by counting.
const turnsSharded = 1 << 63

// init starts the counter at a random offset below span.
func (t *turns) init(span uint64) {
	t.one.Store(rand.Uint64N(max(span, 1)))
}

// next returns the next turn; a rotor it takes starts its counters below
// span. (tree.pick has the single-counter path written out: a call does
// not fit the compiler's inlining budget.)
func (t *turns) next(span uint64) uint64 {
	if old := t.one.Load(); old < turnsSharded && t.one.CompareAndSwap(old, old+1) {
		return old
	}
	return t.contended(span)
}

// contended is next once a swap was lost or the rotor is in use.
func (t *turns) contended(span uint64) uint64 {
	if r := t.hot.Load(); r != nil {
		return r.next()
	}
	if t.clash.Add(1) < clashesToShard {
		return t.one.Add(1) - 1
	}
	t.hot.CompareAndSwap(nil, newRotor(span))
	t.one.Store(turnsSharded)
	return t.hot.Load().next()
}

type roundRobin struct {
	t turns // t.n: the list's length
	m modulus.Modulus
	_ [cacheline.Size - 32]byte // whole cache lines (see package cacheline)
}

type strictRoundRobin struct {
	c atomic.Uint64
	n uint64
	_ [cacheline.Size - 16]byte // a cache line of its own (see package cacheline)
}

func newStrictRoundRobin(list []Instance) Picker {
	p := &strictRoundRobin{n: uint64(len(list))}
	p.c.Store(rand.Uint64N(max(p.n, 1)))
	return p
}

func (p *strictRoundRobin) Next() int {
	if p.n == 0 {
		return 0
	}
	return int((p.c.Add(1) - 1) % p.n)
}

func newRoundRobin(list []Instance) Picker {
	if len(list) == 0 {
		return onlyPicker{}
	}
	n := uint32(len(list))
	p := &roundRobin{m: modulus.New(n)}
	p.t.n = n
	p.t.init(uint64(n))
	return p
}

// Next returns the next candidate (tree.pick has it written out).
func (p *roundRobin) Next() int {
	// A list is far shorter than 2^32; the counter's wrap every 2^32 turns
	// only shifts the rotation once.
	return int(p.m.Of(uint32(p.t.next(uint64(p.t.n))), p.t.n))
}

// onlyPicker is round robin's picker over an empty list (never asked:
// the routing skips empty lists).
type onlyPicker struct{}

func (onlyPicker) Next() int { return 0 }

type random struct {
	n uint64
	_ [cacheline.Size - 8]byte // whole cache lines (see package cacheline)
}

func newRandom(list []Instance) Picker { return &random{n: uint64(len(list))} }

func (p *random) Next() int {
	if p.n == 0 {
		return 0
	}
	return int(rand.Uint64N(p.n))
}

// Bounds of a weighted schedule (see WeightedRoundRobin).
