package engine

import (
	"math"
	"sync/atomic"
	"time"
)

// Stats is what a LoadBalancer knows of one instance's calls: how many are
// in flight, a peak-EWMA estimate of their latency, and (with
// WithOutlierDetection) its consecutive failures and whether it is
// ejected. Every leaf of the routing tree that holds the instance shares
// one Stats, so a result reported through any route counts once. Calls
// feed it (package adapter's Route.Call, then Call.End); latency-aware
// policies read it.
// It is safe for concurrent use; its methods do not allocate.
type Stats struct {
	inflight atomic.Int64
	rtt      atomic.Uint64 // latency estimate in nanoseconds, float64 bits
	stamp    atomic.Int64  // when rtt was last updated, nanoseconds on the monotonic clock
	fails    atomic.Int32  // consecutive failures
	ejected  atomic.Bool
	// pending counts the calls begun since the instance's last result,
	// and waiting is when the first of them began, on the monotonic
	// clock: while two or more are pending, now - waiting is how long the
	// instance has left every call begun since its last result
	// unanswered. (One pending call alone may be a long stream; a call
	// older than the last result says nothing of a hang either.)
	pending   atomic.Int64
	waiting   atomic.Int64
	ejectedAt atomic.Int64 // when it was last ejected, on the monotonic clock
	gray      atomic.Bool  // the instance's kind when the tables were last synced

	o *health // nil without outlier detection
	// Guarded by o.h.mu:
	addr      string
	ejections int       // ejections in a row (the back-off multiplier)
	readmit   time.Time // when it was last readmitted
	stopTimer func() bool
	removed   bool // no longer in the service's list
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

// Ejected reports whether outlier detection has ejected the instance.
func (s *Stats) Ejected() bool { return s.ejected.Load() }

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

// started is one call to a candidate of a routing, from routing.Call to
// Done (package adapter's Call is its adapter-facing form). It is a small
// value: passing it around does not allocate. The zero started is
// valid and Done on it does nothing.
type started struct {
	Instance Instance
	stats    *Stats
	start    int64
}

// Done reports the call's result: ok is false for a failure that counts
// against the instance (a connection failure, a 5xx answer, gRPC
// Unavailable, a call its caller's deadline ended before the instance
// answered; the adapters decide). It ends the call's in-flight count,
// feeds its latency (at least the time waited) to the instance's estimate
// and, with outlier detection, its success or failure to the ejection
// rule: a success of a call begun after the instance was ejected readmits
// it at once. Call Done or Discard exactly once per call.
func (c started) Done(ok bool) { c.doneAt(monoNow(), ok) }

// doneAt is Done for a call that ended at now (on monoNow's clock).
func (c started) doneAt(now int64, ok bool) {
	s := c.stats
	if s == nil {
		return
	}
	if s.pending.Load() != 0 {
		s.pending.Store(0)
	}
	s.inflight.Add(-1)
	lat := float64(now - c.start)
	if !ok {
		lat = max(lat, failurePenalty)
	}
	s.observe(now, lat)
	s.result(ok, c.start)
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

// Report feeds one result that was not started as a call (so it
// was never counted in flight): ok is false for a failure that counts
// against the instance, latency is the call's duration (0 when unknown).
// A success readmits an ejected instance only when its latency shows the
// call began after the ejection (see Done). A nil Stats ignores it.
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
	s.result(ok, start)
}

// result feeds a success or failure of a call begun at start to outlier
// detection. A success of a call begun after the instance was ejected (it
// answers again: it was routed to in a panic, see OutlierConfig, or
// readmitted and ejected again meanwhile) readmits it at once.
func (s *Stats) result(ok bool, start int64) {
	if s.o == nil {
		return
	}
	if ok {
		if s.fails.Load() != 0 {
			s.fails.Store(0)
		}
		if s.ejected.Load() && start >= s.ejectedAt.Load() {
			s.o.readmitAnswered(s)
		}
		return
	}
	if n := s.fails.Add(1); int(n) >= s.o.cfg.ConsecutiveFailures && !s.ejected.Load() {
		s.o.eject(s)
	}
}
