package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of OutlierConfig.
const (
	DefaultConsecutiveFailures = 5
	DefaultBaseEjectionTime    = 30 * time.Second
	DefaultMaxEjectionTime     = 300 * time.Second
	DefaultMaxEjectionPercent  = 50
	DefaultPanicThreshold      = 50
)

// OutlierConfig configures outlier detection (passive health checking):
// an instance whose calls fail ConsecutiveFailures times in a row is
// ejected, that is, not usable, for BaseEjectionTime times the number of
// times it was ejected in a row, at most MaxEjectionTime, and then
// readmitted. The multiplier starts again from one when an instance stays
// admitted for MaxEjectionTime. A failure is what the adapter reports as
// one: a connection failure, a failure status, and a call its caller's
// deadline ended before the instance answered (an instance that hangs
// fails its calls, too).
//
// At most MaxEjectionPercent of a kind's instances (prod or gray, counted
// separately) are ejected at once, but one instance of a kind may always
// be. An ejected instance is treated as any unusable one: a gray request
// whose gray instances are all ejected falls back to prod (Outcome
// FellBack), and a prod request never reaches gray.
//
// Ejection never takes a kind's last usable instances away for good (the
// panic threshold, as Envoy's): when fewer than PanicThreshold percent of
// a kind's instances are usable, the kind is routed over all of its
// instances, ejected ones included, rather than failed. The gray kind
// first falls back to prod: it panics only when every gray instance is
// ejected and prod has no usable instance either. The default, 50 %, is
// Envoy's, and with the default MaxEjectionPercent (50) it never overrides
// ejection in a kind of two or more instances; it takes effect for a kind
// whose single instance is ejected (a lone prod instance restarting
// serves again as soon as it answers, instead of failing every request
// for its ejection time) and for a MaxEjectionPercent above 50.
//
// An ejected instance is back at once when it answers a call begun after
// its ejection (a call routed to it in a panic) or when it leaves the
// service's list and is listed again (it re-registered): its state starts
// afresh.
//
// Zero fields take the defaults (5 failures, 30 s, 300 s, 50 %, 50 %).
type OutlierConfig struct {
	ConsecutiveFailures int
	BaseEjectionTime    time.Duration
	MaxEjectionTime     time.Duration
	// MaxEjectionPercent is within 1-100; other values take the default.
	MaxEjectionPercent int
	// PanicThreshold is the percentage (1-100) of a kind's instances
	// that must be usable for ejection to apply to the kind; other values
	// take the default, 50. 1 panics only when none is usable; 100 routes
	// over ejected instances as soon as one is ejected.
	PanicThreshold int
	// Clock gives time and timers to the ejection rule (nil: the system
	// clock); tests inject one to readmit without waiting.
	Clock Clock
	// OnEjection, when set, is told of every ejection and readmission,
	// outside any lock of the LoadBalancer's. It must not block.
	OnEjection func(Ejection)
}

// Ejection is an ejection (For > 0) or a readmission (For == 0) of an
// instance of a service. In JSON, For is in nanoseconds (as encoding/json
// writes a time.Duration), under the key forNs.
type Ejection struct {
	Service string        `json:"service"`
	Addr    string        `json:"addr"`
	Kind    Kind          `json:"kind"`
	For     time.Duration `json:"forNs"`
	At      time.Time     `json:"at"` // when, by OutlierConfig.Clock
}

// Clock is the time source of outlier detection.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless
	// stop is called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// WithOutlierDetection turns outlier detection on (see OutlierConfig).
// Adapters report each call's result for the instance that served it
// (httpctx's Transport and grpcctx's picker do it themselves); a program
// that picks by hand reports through package adapter (Route.Call and
// Call.End, or Balancer.Report). Reporting a
// result costs a few atomic operations; only an ejection or a
// readmission rebuilds the service's routing, once, on the goroutine that
// reported it.
func WithOutlierDetection(cfg OutlierConfig) Option {
	if cfg.ConsecutiveFailures <= 0 {
		cfg.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if cfg.BaseEjectionTime <= 0 {
		cfg.BaseEjectionTime = DefaultBaseEjectionTime
	}
	if cfg.MaxEjectionTime <= 0 {
		cfg.MaxEjectionTime = DefaultMaxEjectionTime
	}
	cfg.MaxEjectionTime = max(cfg.MaxEjectionTime, cfg.BaseEjectionTime)
	if cfg.MaxEjectionPercent < 1 || cfg.MaxEjectionPercent > 100 {
		cfg.MaxEjectionPercent = DefaultMaxEjectionPercent
	}
	if cfg.PanicThreshold < 1 || cfg.PanicThreshold > 100 {
		cfg.PanicThreshold = DefaultPanicThreshold
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	return func(c *config) { c.outlier = &cfg }
}

// keyOf names an instance within a service without building a string, in
// canonical form (see endpointOf): one machine written two ways (10.0.0.7
// and ::ffff:10.0.0.7) has one Stats, and an ejection keeps it out under
// either spelling.
func keyOf(in Instance) addrKey { return endpointOf(in) }

// rawKey names an instance as its list spells it: the key a lookup finds
// its Stats by without parsing the host (parsing a host name allocates).
type rawKey struct {
	host string
	port int
}

// healthTable is the Stats of one service's instances: one Stats a
// machine, by canonical address, reached also by each spelling of the
// address the list holds.
type healthTable struct {
	byAddr map[addrKey]*Stats
	byRaw  map[rawKey]*Stats
}

// health keeps the Stats of one service's instances, and its ejections.
type health struct {
	service string
	cfg     *OutlierConfig // nil: no ejection
	changed func()         // schedules one rebuild of the service's routing

	mu    sync.Mutex // guards ejection decisions and replacing the table
	table atomic.Pointer[healthTable]
}

// stats returns in's Stats (nil when it is not in the table): by the
// spelling of its address when the list holds that spelling (Report's
// path: no allocation), else by its canonical address.
func (t *healthTable) stats(in Instance) *Stats {
	if s, ok := t.byRaw[rawKey{in.Host, in.Port}]; ok {
		return s
	}
	return t.byAddr[keyOf(in)]
}

// close stops every ejection timer: no readmission runs after the
// LoadBalancer is closed, and nothing keeps it reachable.
func (h *health) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.table.Load().byAddr {
		s.removed = true
		if s.stopTimer != nil {
			s.stopTimer()
			s.stopTimer = nil
		}
	}
}

func newHealth(service string, cfg *OutlierConfig, changed func()) *health {
	h := &health{service: service, cfg: cfg, changed: changed}
	h.table.Store(&healthTable{byAddr: map[addrKey]*Stats{}, byRaw: map[rawKey]*Stats{}})
	return h
}

// sync makes the table follow list: instances still listed keep their
// Stats (and ejections), new ones get fresh Stats, gone ones are dropped.
// kindOf classifies an instance under the rules in force.
func (h *health) sync(list []Instance, kindOf func(Instance) Kind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.table.Load().byAddr
	m := make(map[addrKey]*Stats, len(list))
	raw := make(map[rawKey]*Stats, len(list))
	for _, in := range list {
		k := keyOf(in)
		s := m[k] // listed already under another spelling
		if s == nil {
			s = old[k]
		}
		if s == nil {
			s = &Stats{addr: in.Addr()}
			if h.cfg != nil {
				s.o = h
			}
		}
		s.gray.Store(kindOf(in) == Gray)
		m[k] = s
		raw[rawKey{in.Host, in.Port}] = s
	}
	for k, s := range old {
		if m[k] == nil {
			s.removed = true
			if s.stopTimer != nil {
				s.stopTimer()
				s.stopTimer = nil
			}
		}
	}
	h.table.Store(&healthTable{byAddr: m, byRaw: raw})
}

// statsOf returns inst's Stats (nil when it is not in the table).
func (h *health) statsOf(in Instance) *Stats { return h.table.Load().stats(in) }

// live returns list without its ejected instances (list itself when none
// is ejected) and how many were left out, by kind. A kind whose usable
// instances in list fall below the panic threshold keeps its ejected ones
// (see OutlierConfig), except the gray kind when none of it is usable and
// prod has a usable instance: gray requests fall back to prod.
func (h *health) live(list []Instance) ([]Instance, [2]int) {
	var ejected [2]int
	if h.cfg == nil {
		return list, ejected
	}
	t := h.table.Load()
	var total, out [2]int
	for _, in := range list {
		k := Prod
		s := t.stats(in)
		if s != nil && s.gray.Load() {
			k = Gray
		}
		total[k]++
		if s != nil && s.ejected.Load() {
			out[k]++
		}
	}
	if out[Prod]+out[Gray] == 0 {
		return list, ejected
	}
	var panics [2]bool
	for k := range panics {
		panics[k] = out[k] > 0 && (total[k]-out[k])*100 < h.cfg.PanicThreshold*total[k]
	}
	if panics[Gray] && total[Gray] == out[Gray] && total[Prod] > out[Prod] {
		panics[Gray] = false // gray falls back to prod's usable instances
	}
	n := 0
	for k := range out {
		if !panics[k] {
			n += out[k]
		}
	}
	if n == 0 {
		return list, ejected
	}
	keep := make([]Instance, 0, len(list)-n)
	for _, in := range list {
		if s := t.stats(in); s != nil && s.ejected.Load() {
			k := kindOfGray(s.gray.Load())
			if !panics[k] {
				ejected[k]++
				continue
			}
		}
		keep = append(keep, in)
	}
	return keep, ejected
}

// eject ejects s if it is still failing, still listed, and the share of
// its kind already ejected allows it.
func (h *health) eject(s *Stats) {
	cfg := h.cfg
	h.mu.Lock()
	if s.removed || s.ejected.Load() || int(s.fails.Load()) < cfg.ConsecutiveFailures {
		h.mu.Unlock()
		return
	}
	total, out := 0, 0
	for _, o := range h.table.Load().byAddr {
		if o.gray.Load() == s.gray.Load() {
			total++
			if o.ejected.Load() {
				out++
			}
		}
	}
	if out > 0 && (out+1)*100 > cfg.MaxEjectionPercent*total {
		h.mu.Unlock()
		return
	}
	now := cfg.Clock.Now()
	if !s.readmit.IsZero() && now.Sub(s.readmit) >= cfg.MaxEjectionTime {
		s.ejections = 0
	}
	s.ejections++
	d := min(cfg.BaseEjectionTime*time.Duration(s.ejections), cfg.MaxEjectionTime)
	s.ejectedAt.Store(monoNow())
	s.ejected.Store(true)
	s.stopTimer = cfg.Clock.AfterFunc(d, func() { h.readmit(s) })
	ev := Ejection{Service: h.service, Addr: s.addr, Kind: kindOfGray(s.gray.Load()), For: d, At: now}
	h.mu.Unlock()
	h.changed()
	if cfg.OnEjection != nil {
		cfg.OnEjection(ev)
	}
}

// readmit makes s usable again after its ejection time.
func (h *health) readmit(s *Stats) { h.readmitNow(s, false) }

// readmitAnswered makes s usable again at once: it answered a call begun
// after its ejection. Its ejection timer is stopped.
func (h *health) readmitAnswered(s *Stats) { h.readmitNow(s, true) }

func (h *health) readmitNow(s *Stats, answered bool) {
	h.mu.Lock()
	if s.removed || !s.ejected.Load() {
		h.mu.Unlock()
		return
	}
	if answered && s.stopTimer != nil {
		s.stopTimer()
	}
	s.ejected.Store(false)
	s.fails.Store(0)
	s.readmit = h.cfg.Clock.Now()
	s.stopTimer = nil
	ev := Ejection{Service: h.service, Addr: s.addr, Kind: kindOfGray(s.gray.Load()), At: s.readmit}
	h.mu.Unlock()
	h.changed()
	if h.cfg.OnEjection != nil {
		h.cfg.OnEjection(ev)
	}
}

func kindOfGray(gray bool) Kind {
	if gray {
		return Gray
	}
	return Prod
}
