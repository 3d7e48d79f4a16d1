package graylb

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
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

// PolicyFunc adapts a function to a Policy.
type PolicyFunc func(instances []Instance) Picker

// NewPicker calls f.
func (f PolicyFunc) NewPicker(instances []Instance) Picker { return f(instances) }

// RoundRobin returns the round-robin policy (the default): each candidate
// in turn, from a random starting point. Each core keeps its own rotation
// (see rotor), so concurrent picks on several cores do not contend on one
// counter; the share of every candidate is even, but picks on different
// cores are not interleaved in one global order. StrictRoundRobin keeps a
// single global order at the cost of that contention.
func RoundRobin() Policy { return PolicyFunc(newRoundRobin) }

// StrictRoundRobin returns round robin over one shared atomic counter, as
// grpc-go's round_robin and Spring Cloud LoadBalancer do: one global order
// of turns, but two cores picking at once slow each other down.
func StrictRoundRobin() Policy { return PolicyFunc(newStrictRoundRobin) }

// Random returns the uniform random policy (seeds 002 and 004). It keeps no
// shared state, so concurrent picks do not contend.
func Random() Policy { return PolicyFunc(newRandom) }

// WeightedRoundRobin returns the smooth weighted round-robin policy: each
// candidate gets a share of the picks proportional to its (Nacos) weight,
// spread evenly over a precomputed schedule, so a pick stays O(1).
// Fractional weights are honoured (0.5 gets half of 1.0); weights are
// quantised so the schedule has at most max(65536, 8n) entries, and a
// positive weight never quantises to zero.
func WeightedRoundRobin() Policy { return PolicyFunc(newWeighted) }

// counter is an atomic counter alone on its cache line.
type counter struct {
	_ [64]byte
	n atomic.Uint64
	_ [56]byte
}

// rotorShards is how many counters a rotor spreads its turns over.
const rotorShards = 8

// rotor hands out turns for a round-robin walk without a counter shared by
// every core: each P (via sync.Pool's per-P slot) keeps to one of a few
// counters, each on its own cache line and started at its own random
// offset. One goroutine, or one core, sees a strict rotation; several cores
// each rotate on their own counter, and picks do not slow each other down
// (a single shared counter costs 2-6x per pick when two cores pick at once).
// A shard id is allocated once per P, again only after a GC empties the pool.
type rotor struct {
	shards [rotorShards]counter
	ids    atomic.Uint32
	pool   sync.Pool
}

func newRotor(n uint64) *rotor {
	r := &rotor{}
	for i := range r.shards {
		r.shards[i].n.Store(rand.Uint64N(max(n, 1)))
	}
	return r
}

// next returns the next turn.
func (r *rotor) next() uint64 {
	id, _ := r.pool.Get().(*uint32)
	if id == nil {
		id = new(uint32)
		*id = r.ids.Add(1) % rotorShards
	}
	t := r.shards[*id].n.Add(1) - 1
	r.pool.Put(id)
	return t
}

type roundRobin struct {
	n uint64
	r *rotor
}

type strictRoundRobin struct {
	n uint64
	c counter
}

func newStrictRoundRobin(list []Instance) Picker {
	p := &strictRoundRobin{n: uint64(len(list))}
	p.c.n.Store(rand.Uint64N(max(p.n, 1)))
	return p
}

func (p *strictRoundRobin) Next() int {
	if p.n == 0 {
		return 0
	}
	return int((p.c.n.Add(1) - 1) % p.n)
}

func newRoundRobin(list []Instance) Picker {
	n := uint64(len(list))
	return &roundRobin{n: n, r: newRotor(n)}
}

func (p *roundRobin) Next() int {
	if p.n == 0 {
		return 0
	}
	return int(p.r.next() % p.n)
}

type random struct{ n uint64 }

func newRandom(list []Instance) Picker { return random{n: uint64(len(list))} }

func (p random) Next() int {
	if p.n == 0 {
		return 0
	}
	return int(rand.Uint64N(p.n))
}

type weighted struct {
	schedule []int32
	r        *rotor
}

// newWeighted lays out a schedule in which candidate i appears c_i times,
// c_i proportional to its weight, its appearances evenly spaced: slot k of
// candidate i sits at (k+0.5)/c_i on [0,1), and slots are taken in order.
func newWeighted(list []Instance) Picker {
	n := len(list)
	if n == 0 {
		return &weighted{r: newRotor(0)}
	}
	minW := math.Inf(1)
	for _, in := range list {
		if w := in.Weight; w > 0 && w < minW {
			minW = w
		}
	}
	units := make([]float64, n)
	total := 0.0
	for i, in := range list {
		if in.Weight > 0 && !math.IsInf(minW, 1) {
			units[i] = in.Weight / minW
			total += units[i]
		}
	}
	if total == 0 { // no positive weight: plain round robin
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(i)
		}
		return &weighted{schedule: s, r: newRotor(uint64(n))}
	}
	limit := float64(max(1<<16, 8*n))
	scale := 1.0
	if total > limit {
		scale = limit / total
	}
	type slot struct {
		at float64
		i  int32
	}
	counts := make([]int, n)
	size := 0
	for i, u := range units {
		if u == 0 {
			continue
		}
		counts[i] = max(1, int(math.Round(u*scale)))
		size += counts[i]
	}
	slots := make([]slot, 0, size)
	for i, c := range counts {
		for k := 0; k < c; k++ {
			slots = append(slots, slot{at: (float64(k) + 0.5) / float64(c), i: int32(i)})
		}
	}
	sort.Slice(slots, func(a, b int) bool {
		if slots[a].at != slots[b].at {
			return slots[a].at < slots[b].at
		}
		return slots[a].i < slots[b].i
	})
	s := make([]int32, len(slots))
	for k, sl := range slots {
		s[k] = sl.i
	}
	return &weighted{schedule: s, r: newRotor(uint64(len(s)))}
}

func (p *weighted) Next() int {
	n := uint64(len(p.schedule))
	if n == 0 {
		return 0
	}
	return int(p.schedule[p.r.next()%n])
}
