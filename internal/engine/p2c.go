package engine

import (
	"math/rand/v2"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
)

// P2C is Finagle's and Linkerd's algorithm; the peak EWMA's time constant is
// theirs, 10 s (docs/choices.md).

// P2C is policy.P2C.
func P2C() Policy { return p2cPolicy{} }

type p2cPolicy struct{}

func (p2cPolicy) NewPicker(list []Instance) Picker {
	stats := make([]*Stats, len(list))
	for i := range stats {
		stats[i] = &Stats{}
	}
	return p2cPolicy{}.NewStatsPicker(list, stats)
}

func (p2cPolicy) NewStatsPicker(list []Instance, stats []*Stats) Picker {
	return &p2c{stats: stats}
}

// p2cBase is added to every estimate (in nanoseconds) so that calls in
// flight weigh on instances not measured yet.
const p2cBase = 1000

type p2c struct {
	stats []*Stats
	_     [cacheline.Size - unsafe.Sizeof([]*Stats(nil))%cacheline.Size]byte // whole cache lines (see package cacheline)
}

func (p *p2c) Next() int {
	n := len(p.stats)
	if n <= 1 {
		return 0
	}
	a := rand.IntN(n)
	b := rand.IntN(n - 1)
	if b >= a {
		b++
	}
	now := monoNow()
	if p.load(b, now) < p.load(a, now) {
		return b
	}
	return a
}

func (p *p2c) load(i int, now int64) float64 {
	s := p.stats[i]
	return (max(s.cost(now), s.unanswered(now)) + p2cBase) * float64(s.inflight.Load()+1)
}
