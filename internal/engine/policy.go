package engine

import (
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/modulus"
	"github.com/graylb/graylb/internal/rotor"
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
// from then on each core keeps its own rotation (see package rotor), so
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

type roundRobin struct {
	roundRobinFields
	_ [cacheline.Size - unsafe.Sizeof(roundRobinFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// roundRobinFields are the fields of a roundRobin, which pads them to whole cache
// lines.
type roundRobinFields struct {
	t rotor.Turns // t.N: the list's length
	m modulus.Modulus
}

type strictRoundRobin struct {
	strictRoundRobinFields
	_ [cacheline.Size - unsafe.Sizeof(strictRoundRobinFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// strictRoundRobinFields are the fields of a strictRoundRobin, which pads them to whole cache
// lines.
type strictRoundRobinFields struct {
	c atomic.Uint64
	n uint64
}

func newStrictRoundRobin(list []Instance) Picker {
	p := &strictRoundRobin{strictRoundRobinFields: strictRoundRobinFields{n: uint64(len(list))}}
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
	p := &roundRobin{roundRobinFields: roundRobinFields{m: modulus.New(n)}}
	p.t.N = n
	p.t.Init(uint64(n))
	return p
}

// Next returns the next candidate (tree.pick has it written out).
func (p *roundRobin) Next() int {
	// A list is far shorter than 2^32; the counter's wrap every 2^32 turns
	// only shifts the rotation once.
	return int(p.m.Of(uint32(p.t.Next(uint64(p.t.N))), p.t.N))
}

// onlyPicker is round robin's picker over an empty list (never asked:
// the routing skips empty lists).
type onlyPicker struct{}

func (onlyPicker) Next() int { return 0 }

type random struct {
	n uint64
	_ [cacheline.Size - unsafe.Sizeof(uint64(0))%cacheline.Size]byte // whole cache lines (see package cacheline)
}

func newRandom(list []Instance) Picker { return &random{n: uint64(len(list))} }

func (p *random) Next() int {
	if p.n == 0 {
		return 0
	}
	return int(rand.Uint64N(p.n))
}
