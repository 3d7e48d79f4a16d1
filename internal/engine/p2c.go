package engine

import (
	"math/rand/v2"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
)

// P2C returns the power-of-two-choices policy with peak-EWMA latency, the
// algorithm of Finagle's and Linkerd's balancers: each pick draws two
// distinct candidates at random and takes the one of lower cost, where
//
//	cost = (latency estimate + 1 µs) × (calls in flight + 1)
//
// The latency estimate is a peak EWMA of the instance's results (Stats):
// a slower result replaces it at once, faster ones pull it down with a
// weight that grows with the time since the last result (time constant
// 10 s), and it decays towards zero while the instance gets no results, so
// an instance that was slow is tried again after a while instead of being
// starved. A failed call counts as at least 1 s, so an instance that fails
// fast does not attract traffic, and a call its caller's deadline ended
// before the instance answered counts as a failure that took at least the
// time waited. An instance not measured yet costs little, so a new
// instance is tried at once; but while two or more calls begun since its
// last result are in flight, the estimate is at least how long they have
// waited, so an instance that accepts calls and never answers is priced by
// the age of its calls, not at almost nothing, long before the first of
// them times out. (One call alone, such as a long stream, does not count.)
//
// The policy reads the Stats the LoadBalancer keeps for it (P2C turns them
// on) and fed by the calls' results: through httpctx's Transport and
// grpcctx's picker by themselves, or package adapter's Route.Call and
// Call.End by hand. A
// picker built with NewPicker alone has no results to read and picks
// uniformly at random.
//
// A pick costs two random numbers, a clock reading and two estimates; it
// is O(1), takes no lock and does not allocate.
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
