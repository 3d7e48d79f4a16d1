// Package wrr builds and walks smooth weighted round-robin schedules: each
// candidate gets a share of the turns proportional to its weight,
// fractions included (1 : 1.5 is 2 : 3), spread evenly over a precomputed
// schedule of up to four levels.
//
// Contract (over whole cycles of the schedule): every candidate's share is
// within 0.5 % (relative) of weight/total, except where the slot limit
// binds. Every positive weight is picked at least once per cycle of the
// first level, which has at most L = max(65536, 8n) slots for n
// candidates, so a share below 1/L is raised to exactly 1/L; when z shares
// are raised, the others are within 0.5 % + z/L of theirs. A weight of 0,
// below 0 or NaN gets nothing; if no weight is positive, the schedule is
// plain round robin. Each level spreads every candidate's slots evenly over
// its cycle, so a candidate's turns are spaced out, not bunched.
//
// Cost: At is O(1) (one slot, and a slot of a deeper level on a small
// share of turns) and does not allocate; New is O(n + slots), and a
// schedule has at most max(65536, 8n) + 24n slots of 4 bytes. A Schedule
// is immutable once built: safe for concurrent use.
//
// Exported identifiers are for the engine only.
package wrr

import "math"

const (
	// target is the relative share error a schedule aims at.
	target = 0.005
	// maxLevels bounds how many levels a schedule has.
	maxLevels = 4
	// minSlots is the least slot limit of a level.
	minSlots = 1 << 16
)

// level is one level of a schedule below the first.
type level struct {
	s    []int32 // candidate index, or ^k for the level's k-th residual slot
	rest uint64  // residual slots in s
}

// Schedule is a smooth weighted round-robin schedule of up to maxLevels
// levels, walked by one counter. Turn t takes slot t mod len(first) of the
// first level; a residual slot (^k, the k-th of rest per cycle) hands the
// turn to the next level as turn (t / len(first)) * rest + k, and so on.
// So each level is walked in order, whole cycle after whole cycle. The
// zero Schedule (no candidate) gives candidate 0 for every turn.
type Schedule struct {
	first  []int32 // first level
	rest   uint64  // residual slots in first
	deeper []level
	span   uint64 // see Span
}

// Len returns the number of slots of the schedule's first level: a cycle
// of it gives every positive weight at least one turn.
func (s *Schedule) Len() int { return len(s.first) }

// Span is where a walk's counters should start below for a random start on
// every level: len(first)·2^20 for weighted schedules, the number of
// candidates for plain round robin.
func (s *Schedule) Span() uint64 { return s.span }

// At returns the candidate of turn t.
func (s *Schedule) At(t uint64) int {
	n := uint64(len(s.first))
	if n == 0 {
		return 0
	}
	if e := s.first[t%n]; e >= 0 {
		return int(e)
	}
	return s.deeperAt(t)
}

// deeperAt returns the candidate of turn t when its first-level slot is a
// residual one.
func (s *Schedule) deeperAt(t uint64) int {
	sl, rest := s.first, s.rest
	for i := 0; ; i++ {
		n := uint64(len(sl))
		if n == 0 {
			return 0
		}
		e := sl[t%n]
		if e >= 0 || i == len(s.deeper) {
			return int(max(e, 0))
		}
		t = t/n*rest + uint64(^e)
		sl, rest = s.deeper[i].s, s.deeper[i].rest
	}
}

// New builds the schedule of n candidates, candidate i of the given weight.
//
// Each level has L slots: every member gets a whole number of them, laid
// out evenly (slot k of a member with c slots at (k+0.5)/c on [0,1)). If
// some L up to the level's slot limit, max(65536, 8m) for m members, gives
// every member its share to within its tolerance, the smallest such L found
// ends the schedule. Otherwise L is the limit: members whose tolerance is
// at least two slots are rounded (one of them, the filler, takes the
// rounding carry), the others get the whole part of their L*share, and the
// fractions left over (together an integer number of slots, rest) become
// residual slots shared out by the next level in proportion to those
// fractions, with the tolerances still unspent. A member's share is then
// exact up to its tolerance; only the last level rounds regardless.
//
// On the first level a member whose L*share is below one slot gets one
// slot, so every positive weight is picked at least once per cycle of the
// first level.
func New(n int, weight func(i int) float64) Schedule {
	if n == 0 {
		return Schedule{}
	}
	// Normalise by the largest weight first so the total cannot overflow;
	// +Inf weights share the traffic evenly between them.
	top := 0.0
	for i := 0; i < n; i++ {
		if w := weight(i); w > top {
			top = w
		}
	}
	idx := make([]int32, 0, n)
	share := make([]float64, 0, n)
	total := 0.0
	for i := 0; i < n; i++ {
		w := weight(i)
		switch {
		case math.IsInf(top, 1) && math.IsInf(w, 1):
			w = 1
		case math.IsInf(top, 1) || !(w > 0):
			continue
		default:
			w /= top
		}
		if w == 0 { // underflow of a positive weight: keep it smallest
			w = math.SmallestNonzeroFloat64
		}
		idx = append(idx, int32(i))
		share = append(share, w)
		total += w
	}
	if len(idx) == 0 { // no positive weight: plain round robin
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(i)
		}
		return Schedule{first: s, span: uint64(n)}
	}
	tol := make([]float64, len(share))
	for i := range share {
		share[i] /= total
		tol[i] = target * share[i]
	}
	var b builder
	var p Schedule
	for depth := 0; ; depth++ {
		lv, next := b.level(idx, share, tol, depth == 0, depth == maxLevels-1)
		if depth == 0 {
			p.first, p.rest = lv.s, lv.rest
		} else {
			p.deeper = append(p.deeper, lv)
		}
		if lv.rest == 0 {
			break
		}
		idx, share, tol = next.idx, next.share, next.tol
	}
	// A random start on every level, not only the first.
	p.span = uint64(len(p.first)) << 20
	return p
}
