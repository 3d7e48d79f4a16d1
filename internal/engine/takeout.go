package engine

import "time"

// Why an instance goes out of rotation (Ejection.Reason).
const (
	reasonConsecutive = "consecutive-failures"
	reasonPercentage  = "failure-percentage"
	reasonRate        = "failure-rate"
	reasonOverloaded  = "overloaded"
)

// kinds is a set of kinds of request, by bit (1 << Kind).
type kinds uint8

const everyKind kinds = 1<<Prod | 1<<Gray

func (m kinds) has(k int) bool { return m&(1<<k) != 0 }

// requests names the kinds of request m holds, for Ejection.Requests.
func (m kinds) requests() string {
	switch m {
	case 1 << Prod:
		return Prod.String()
	case 1 << Gray:
		return Gray.String()
	}
	return ""
}

// result feeds the answer to a call of a request of kind k, begun at
// start and ended at now, to outlier detection.
func (h *health) result(s *Stats, k Kind, a Answer, start, now int64, retryAfter time.Duration) {
	h.tick(now)
	sl := &s.by[k&1]
	switch a {
	case AnswerOK:
		sl.calls.Add(1)
		if s.fails.Load() != 0 {
			s.fails.Store(0)
		}
		if s.overloads.Load() != 0 {
			s.overloads.Store(0)
		}
		if sl.fails.Load() != 0 {
			sl.fails.Store(0)
		}
		if sl.out.Load() && start >= sl.at.Load() {
			h.readmitAnswered(s, k&1)
		}
	case AnswerOverloaded:
		if !s.by[Prod].out.Load() || !s.by[Gray].out.Load() {
			h.pause(s, retryAfter)
		}
	default:
		sl.calls.Add(1)
		sl.failed.Add(1)
		n, m := int(s.fails.Add(1)), int(sl.fails.Add(1))
		switch limit := h.cfg.ConsecutiveFailures; {
		case n >= limit && (!s.by[Prod].out.Load() || !s.by[Gray].out.Load()):
			h.takeOut(s, everyKind, reasonConsecutive, 0)
		case m >= limit && !sl.out.Load():
			h.takeOut(s, 1<<(k&1), reasonConsecutive, 0)
		default:
			h.judgeRate(s, k&1)
		}
	}
}

// reported feeds a result that belongs to no request (Stats.Report): it
// counts toward the consecutive failures of every kind.
func (h *health) reported(s *Stats, ok bool, start int64) {
	if ok {
		if s.fails.Load() != 0 {
			s.fails.Store(0)
		}
		for k := range s.by {
			if sl := &s.by[k]; sl.out.Load() && start >= sl.at.Load() {
				h.readmitAnswered(s, Kind(k))
			}
		}
		return
	}
	if int(s.fails.Add(1)) >= h.cfg.ConsecutiveFailures && (!s.by[Prod].out.Load() || !s.by[Gray].out.Load()) {
		h.takeOut(s, everyKind, reasonConsecutive, 0)
	}
}

// pause takes s out of rotation for every kind of request after an
// overloaded answer: for retryAfter (at most MaxRetryAfter) when the
// answer named one, else for OverloadPause; and for twice as long as its
// last pause when it was overloaded again at once (an instance that keeps
// shedding is tried less and less often), at most MaxRetryAfter.
func (h *health) pause(s *Stats, retryAfter time.Duration) {
	cfg := h.cfg
	d := cfg.OverloadPause
	if retryAfter > 0 && cfg.MaxRetryAfter > 0 {
		d = min(retryAfter, cfg.MaxRetryAfter)
	}
	if d <= 0 {
		return
	}
	if n := s.overloads.Load(); n > 0 {
		limit := cfg.MaxRetryAfter
		if limit <= 0 {
			limit = DefaultMaxRetryAfter
		}
		d = min(max(d, cfg.OverloadPause<<min(n, 16)), max(limit, d))
	}
	if h.takeOut(s, everyKind, reasonOverloaded, d) {
		s.overloads.Add(1)
	}
}

// takeOut takes s out of rotation for the kinds of request in m that it
// is not out for already and that the cap allows: ejected (for its
// ejection time, which grows with each ejection in a row) or, for the
// reason reasonOverloaded, paused for d. It reports whether s went out.
func (h *health) takeOut(s *Stats, m kinds, reason string, d time.Duration) bool {
	cfg := h.cfg
	h.mu.Lock()
	if s.removed {
		h.mu.Unlock()
		return false
	}
	var go_ kinds
	for k := range s.by {
		sl := &s.by[k]
		if !m.has(k) || sl.out.Load() || !h.capAllows(s, k) {
			continue
		}
		if reason == reasonConsecutive && int(sl.fails.Load()) < cfg.ConsecutiveFailures && int(s.fails.Load()) < cfg.ConsecutiveFailures {
			continue // a success came in between
		}
		go_ |= 1 << k
	}
	if go_ == 0 {
		h.mu.Unlock()
		return false
	}
	now := cfg.Clock.Now()
	if reason != reasonOverloaded {
		n := 0
		for k := range s.by {
			if sl := &s.by[k]; go_.has(k) {
				if !sl.readmit.IsZero() && now.Sub(sl.readmit) >= cfg.MaxEjectionTime {
					sl.ejections = 0
				}
				sl.ejections++
				n = max(n, sl.ejections)
			}
		}
		d = min(cfg.BaseEjectionTime*time.Duration(n), cfg.MaxEjectionTime)
	}
	h.seq++
	seq, at := h.seq, monoNow()
	stop := cfg.Clock.AfterFunc(d, func() { h.readmitDue(s, go_, seq) })
	for k := range s.by {
		if sl := &s.by[k]; go_.has(k) {
			sl.at.Store(at)
			sl.out.Store(true)
			sl.seq, sl.stopTimer, sl.paused = seq, stop, reason == reasonOverloaded
		}
	}
	ev := Ejection{Service: h.service, Addr: s.addr, Kind: kindOfGray(s.gray.Load()), Requests: go_.requests(), Reason: reason, For: d, At: now}
	h.events[ev.Kind][0].Add(1)
	h.mu.Unlock()
	h.changed()
	if cfg.OnEjection != nil {
		cfg.OnEjection(ev)
	}
	return true
}

// capAllows reports whether s may go out for requests of kind k: a gray
// instance always may (prod is the fall-back of every gray request); at
// most MaxEjectionPercent of the prod instances may be out for a kind of
// request, but one always may. h.mu is held.
func (h *health) capAllows(s *Stats, k int) bool {
	if s.gray.Load() {
		return true
	}
	total, out := 0, 0
	for _, o := range h.table.Load().byAddr {
		if !o.gray.Load() {
			total++
			if o.by[k].out.Load() {
				out++
			}
		}
	}
	return out == 0 || (out+1)*100 <= h.cfg.MaxEjectionPercent*total
}

// readmitDue puts s back in rotation for the kinds of request in m that
// it is still out for by take-out seq, when that take-out's time is up.
func (h *health) readmitDue(s *Stats, m kinds, seq uint64) {
	h.mu.Lock()
	var back kinds
	if !s.removed {
		for k := range s.by {
			if sl := &s.by[k]; m.has(k) && sl.out.Load() && sl.seq == seq {
				sl.stopTimer = nil
				h.putBack(s, k)
				back |= 1 << k
			}
		}
	}
	h.announceBack(s, back) // unlocks
}

// readmitAnswered puts s back in rotation for requests of kind k at once:
// it answered such a call begun after it went out. The other kind comes
// back too when it is out by the same take-out (one that was for every
// kind), and that take-out's timer is stopped.
func (h *health) readmitAnswered(s *Stats, k Kind) {
	h.mu.Lock()
	sl := &s.by[k]
	if s.removed || !sl.out.Load() {
		h.mu.Unlock()
		return
	}
	back := kinds(1 << k)
	if other := &s.by[1-k]; other.out.Load() && other.seq == sl.seq {
		other.stopTimer = nil
		h.putBack(s, int(1-k))
		back = everyKind
	}
	if sl.stopTimer != nil {
		sl.stopTimer()
		sl.stopTimer = nil
	}
	h.putBack(s, int(k))
	h.announceBack(s, back)
}

// putBack puts s back in rotation for requests of kind k, its counts
// afresh; h.mu is held.
func (h *health) putBack(s *Stats, k int) {
	sl := &s.by[k]
	sl.out.Store(false)
	sl.fails.Store(0)
	s.fails.Store(0)
	sl.calls.Store(0)
	sl.failed.Store(0)
	sl.prevCalls.Store(0)
	sl.prevFailed.Store(0)
	if !sl.paused {
		sl.readmit = h.cfg.Clock.Now()
	}
	sl.paused = false
}

// announceBack unlocks h.mu and, when s came back for some kind (back),
// rebuilds the routing and tells OnEjection.
func (h *health) announceBack(s *Stats, back kinds) {
	if back == 0 {
		h.mu.Unlock()
		return
	}
	ev := Ejection{Service: h.service, Addr: s.addr, Kind: kindOfGray(s.gray.Load()), Requests: back.requests(), At: h.cfg.Clock.Now()}
	h.events[ev.Kind][1].Add(1)
	h.mu.Unlock()
	h.changed()
	if h.cfg.OnEjection != nil {
		h.cfg.OnEjection(ev)
	}
}
