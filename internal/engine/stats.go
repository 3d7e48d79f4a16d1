package engine

import (
	"math"
	"sync/atomic"
	"time"
)

// Every leaf of the routing tree that holds an instance shares its one Stats,
// so a result reported through any route counts once.

// Stats is policy.Stats.
type Stats struct {
	inflight atomic.Int64
	rtt      atomic.Uint64 // latency estimate in nanoseconds, float64 bits
	stamp    atomic.Int64  // when rtt was last updated, nanoseconds on the monotonic clock
	fails    atomic.Int32  // consecutive failures, of any kind of request
	// pending counts the calls begun since the instance's last result,
	// and waiting is when the first of them began, on the monotonic
	// clock: while two or more are pending, now - waiting is how long the
	// instance has left every call begun since its last result
	// unanswered. (One pending call alone may be a long stream; a call
	// older than the last result says nothing of a hang either.)
	pending atomic.Int64
	waiting atomic.Int64
	gray    atomic.Bool // the instance's kind when the tables were last synced
	// overloads counts its pauses in a row (no answer that was not
	// overloaded between them): each lasts twice the one before.
	overloads atomic.Int32
	// by is the outlier state for requests of each kind (Prod, Gray): an
	// instance can be out of rotation for one kind of request only (it
	// fails gray-marked requests alone, say).
	by [2]slot

	o *health // nil without outlier detection
	// Guarded by o.mu:
	addr    string
	removed bool // no longer in the service's list
}

// slot is an instance's outlier state for one kind of request.
type slot struct {
	out   atomic.Bool  // out of rotation (ejected or paused) for this kind of request
	at    atomic.Int64 // when it went out, on the monotonic clock
	fails atomic.Int32 // consecutive failures of this kind of request
	// calls and failed count this kind's results in the current bucket of
	// the failure-rate window, prevCalls and prevFailed in the one before.
	calls, failed         atomic.Int64
	prevCalls, prevFailed atomic.Int64

	// Guarded by o.mu:
	ejections int         // ejections in a row (the back-off multiplier)
	readmit   time.Time   // when it was last readmitted
	seq       uint64      // which take-out it is out by (a timer readmits only its own)
	stopTimer func() bool // the take-out's timer
	paused    bool        // out by an overloaded answer, which is no ejection
}

// begin counts a call in flight and returns its start.
func (s *Stats) begin() int64 {
	now := monoNow()
	s.inflight.Add(1)
	if s.pending.Add(1) == 1 {
		s.waiting.Store(now)
	}
	return now
}

// unanswered returns how long the calls begun since the instance's last
// result have waited, when two or more have (else 0): an instance that
// accepts calls and never answers is priced by it before its first call
// times out, while one holding a single long call (a stream) is not.
func (s *Stats) unanswered(now int64) float64 {
	if s.pending.Load() < 2 || s.inflight.Load() < 2 {
		return 0
	}
	return float64(max(now-s.waiting.Load(), 0))
}

// InFlight returns the number of calls started and not yet done.
func (s *Stats) InFlight() int64 { return s.inflight.Load() }

// Latency returns the current latency estimate (0 before the first
// result), decayed to now.
func (s *Stats) Latency() time.Duration {
	return time.Duration(s.cost(monoNow()))
}

// Ejected reports whether outlier detection took the instance out of
// rotation, for any kind of request (see EjectedFor).
func (s *Stats) Ejected() bool { return s.by[Prod].out.Load() || s.by[Gray].out.Load() }

// EjectedFor reports whether outlier detection took the instance out of
// rotation for requests of kind k: ejected, or paused after an overloaded
// answer.
func (s *Stats) EjectedFor(k Kind) bool { return s.by[k&1].out.Load() }

// ewmaDecay is the time constant of the latency estimate: an observation's
// weight halves in about 7 s (as Finagle's and Linkerd's peak EWMA, 10 s).
const ewmaDecay = float64(10 * time.Second)

// failurePenalty is the least latency a failed call counts as, so an
// instance that fails fast does not look fast to a latency-aware policy.
const failurePenalty = float64(time.Second)

// epoch anchors monoNow; it is set once and never changes.
var epoch = time.Now()

// monoNow returns nanoseconds since epoch on the monotonic clock.
func monoNow() int64 { return int64(time.Since(epoch)) }

// cost returns the latency estimate decayed to now: an instance that got
// no results for a while looks faster, so it is tried again.
func (s *Stats) cost(now int64) float64 {
	rtt := math.Float64frombits(s.rtt.Load())
	if rtt == 0 {
		return 0
	}
	if dt := now - s.stamp.Load(); dt > 0 {
		rtt *= math.Exp(-float64(dt) / ewmaDecay)
	}
	return rtt
}

// observe folds one latency into the estimate: a latency above the
// estimate replaces it at once (the peak), a lower one is averaged in with
// a weight that grows with the time since the last observation.
func (s *Stats) observe(now int64, latency float64) {
	for i := 0; i < 4; i++ { // a lost race just drops the observation
		old := s.rtt.Load()
		prev := math.Float64frombits(old)
		next := latency
		if prev != 0 && latency < prev {
			dt := float64(now - s.stamp.Load())
			w := math.Exp(-max(dt, 0) / ewmaDecay)
			next = prev*w + latency*(1-w)
		}
		if s.rtt.CompareAndSwap(old, math.Float64bits(next)) {
			s.stamp.Store(now)
			return
		}
	}
}

// Answer is what a call's result says of the instance that served it.
type Answer uint8

const (
	// AnswerOK: the instance answered; the answer does not count against it.
	AnswerOK Answer = iota
	// AnswerFailed: a failure that counts against the instance (outlier
	// detection; a latency of at least failurePenalty for P2C).
	AnswerFailed
	// AnswerOverloaded: the instance answered that it is overloaded (HTTP
	// 429, gRPC ResourceExhausted). It does not count toward ejection; it
	// prices the instance as a failure does for P2C and, with outlier
	// detection, pauses it (see OutlierConfig.OverloadPause).
	AnswerOverloaded
)

// started is one call to a candidate of a routing, from routing.Call to
// Done (package adapter's Call is its adapter-facing form). It is a small
// value: passing it around does not allocate. The zero started is
// valid and Done on it does nothing.
type started struct {
	Instance Instance
	stats    *Stats
	start    int64
	kind     Kind // the request's kind
}

// Done reports the call's result: ok is false for a failure that counts
// against the instance (see End).
func (c started) Done(ok bool) {
	a := AnswerOK
	if !ok {
		a = AnswerFailed
	}
	c.endAt(monoNow(), a, 0)
}

// End reports the call's result. It ends the call's in-flight count,
// feeds its latency (at least failurePenalty unless AnswerOK) to the
// instance's estimate and, with outlier detection, the answer to the
// ejection rules for requests of the call's kind: a success of a call
// begun after the instance went out of rotation for that kind readmits it
// at once; an overloaded answer pauses it for retryAfter (0: unknown).
// Call End, Done or Discard exactly once per call.
func (c started) End(a Answer, retryAfter time.Duration) { c.endAt(monoNow(), a, retryAfter) }

// endAt is End for a call that ended at now (on monoNow's clock).
func (c started) endAt(now int64, a Answer, retryAfter time.Duration) {
	s := c.stats
	if s == nil {
		return
	}
	if s.pending.Load() != 0 {
		s.pending.Store(0)
	}
	s.inflight.Add(-1)
	lat := float64(now - c.start)
	if a != AnswerOK {
		lat = max(lat, failurePenalty)
	}
	s.observe(now, lat)
	if s.o != nil {
		s.o.result(s, c.kind, a, c.start, now, retryAfter)
	}
}

// Discard ends the call without a result, for a call that says nothing of
// the instance (the caller cancelled it).
func (c started) Discard() {
	s := c.stats
	if s == nil {
		return
	}
	s.inflight.Add(-1)
	if s.pending.Load() > 0 {
		s.pending.Add(-1) // no longer waiting; a lost race only makes the count smaller
	}
}

// Stats returns the instance's Stats (nil when the LoadBalancer keeps none:
// no outlier detection and a policy that reads none).
func (c started) Stats() *Stats { return c.stats }

// Report feeds one result that was not started as a call (so it was never
// counted in flight) and belongs to no request (a connection that failed
// before any call): ok is false for a failure that counts against the
// instance, latency is the call's duration (0 when unknown). It counts
// toward the consecutive failures of every kind of request, not toward a
// kind's rate. A success readmits an ejected instance only when its
// latency shows the call began after the ejection (see End). A nil Stats
// ignores it.
func (s *Stats) Report(ok bool, latency time.Duration) {
	if s == nil {
		return
	}
	lat := float64(latency)
	if !ok {
		lat = max(lat, failurePenalty)
	}
	now := monoNow()
	if lat > 0 {
		s.observe(now, lat)
	}
	start := int64(math.MinInt64) // unknown: it may have begun before the ejection
	if latency > 0 {
		start = now - int64(latency)
	}
	if s.o != nil {
		s.o.reported(s, ok, start)
	}
}
