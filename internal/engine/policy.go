package engine

import (
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/modulus"
	"github.com/graylb/graylb/internal/rotor"
)

// Policy is policy.Policy.
type Policy interface {
	NewPicker(instances []Instance) Picker
}

// Picker is policy.Picker.
type Picker interface {
	// Next returns an index into the list it was built over. It must be
	// safe for concurrent use, not block, and not allocate.
	Next() int
}

// StatsPolicy is policy.StatsPolicy.
type StatsPolicy interface {
	Policy
	NewStatsPicker(instances []Instance, stats []*Stats) Picker
}

// PolicyFunc is policy.Func.
type PolicyFunc func(instances []Instance) Picker

// NewPicker calls f.
func (f PolicyFunc) NewPicker(instances []Instance) Picker { return f(instances) }

// A round-robin picker keeps one counter (one global rotation) until its picks
// contend, on several cores at once; from then on each core keeps its own
// rotation (see package rotor). So a candidate list picked by one goroutine at
// a time, or rarely, costs one counter word, not the sharded counters (2 KiB).

// RoundRobin is policy.RoundRobin.
func RoundRobin() Policy { return PolicyFunc(newRoundRobin) }

// StrictRoundRobin is policy.StrictRoundRobin.
func StrictRoundRobin() Policy { return PolicyFunc(newStrictRoundRobin) }

// Random is policy.Random.
func Random() Policy { return PolicyFunc(newRandom) }

// The weighted schedule (weighted.go): each level spreads every candidate's
// slots evenly over its cycle; a pick reads one counter, one slot, and a slot of
// a deeper level on a small share of picks (at most four levels). A build is
// O(n + slots). docs/choices.md has the accuracy and memory measured.

// WeightedRoundRobin is policy.WeightedRoundRobin.
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
