package engine

import (
	"math/rand/v2"
	"sync"
	"time"
)

// ShadowOutcome is what became of one shadow copy, or of one write a copy
// attempted (see package shadow, whose doc is the contract).
type ShadowOutcome uint8

// The outcomes of shadow.Event.
const (
	ShadowSame         ShadowOutcome = iota // the copy's answer matched the primary's
	ShadowDiffers                           // it differed (Event.Status, Latency, Body say how)
	ShadowFailed                            // the copy got no answer (no gray instance, an error, its deadline)
	ShadowDropped                           // no copy was sent: the bounds were full
	ShadowBlockedWrite                      // a write made under the shadow mark was refused
	ShadowNoise                             // two prod answers to one request differed: the paths learned as noise
)

var shadowOutcomeNames = [...]string{"same", "differs", "failed", "dropped", "blocked-write", "noise"}

func (o ShadowOutcome) String() string {
	if int(o) < len(shadowOutcomeNames) {
		return shadowOutcomeNames[o]
	}
	return "unknown"
}

// ShadowAnswer is one answer of a mirrored call: its status (HTTP status,
// or gRPC code), its latency and its body, cut at the mirror's bound.
type ShadowAnswer struct {
	Status  int           `json:"status"`
	Latency time.Duration `json:"latencyNs"`
	Body    []byte        `json:"body,omitempty"`
	Err     string        `json:"err,omitempty"`
}

// ShadowEvent is shadow.Event.
type ShadowEvent struct {
	Service string        `json:"service"`
	Route   string        `json:"route"` // the method and path (HTTP), the full method (gRPC)
	Outcome ShadowOutcome `json:"outcome"`
	// How the copy's answer differed (Outcome ShadowDiffers).
	Status  bool          `json:"status,omitempty"`
	Latency bool          `json:"latency,omitempty"`
	Body    bool          `json:"body,omitempty"`
	Paths   []string      `json:"paths,omitempty"` // the JSON paths that differed (or were learned as noise)
	Primary *ShadowAnswer `json:"primary,omitempty"`
	Copy    *ShadowAnswer `json:"copy,omitempty"`
	At      time.Time     `json:"at"`
}

// ShadowObserver is told of every shadow event. It must not block.
type ShadowObserver func(ShadowEvent)

// WithShadowObserver is shadow.WithObserver.
func WithShadowObserver(o ShadowObserver) Option {
	return func(c *config) {
		if o != nil {
			c.shadowObs = append(c.shadowObs, o)
		}
	}
}

// maxShadowDiffs is how many differing copies the LoadBalancer keeps for
// the debug page.
const maxShadowDiffs = 16

// shadowLog keeps the last differing copies.
type shadowLog struct {
	mu   sync.Mutex
	last []ShadowEvent // newest last
}

// ShadowDraw reports whether a prod request to mirror is drawn under the
// rules in force (their shadowPercent).
func (lb *LoadBalancer) ShadowDraw() bool {
	s := lb.rules.Load().shadow
	return s > 0 && rand.Uint32N(canaryScale) < s
}

// ShadowPercent returns the rules' share of prod requests mirrored.
func (lb *LoadBalancer) ShadowPercent() float64 {
	return float64(lb.rules.Load().shadow) * 100 / canaryScale
}

// Shadowed tells the LoadBalancer's shadow observers of ev and keeps it
// when the copy differed.
func (lb *LoadBalancer) Shadowed(ev ShadowEvent) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	if ev.Outcome == ShadowDiffers {
		lb.shadowLog.mu.Lock()
		if len(lb.shadowLog.last) == maxShadowDiffs {
			copy(lb.shadowLog.last, lb.shadowLog.last[1:])
			lb.shadowLog.last = lb.shadowLog.last[:maxShadowDiffs-1]
		}
		lb.shadowLog.last = append(lb.shadowLog.last, ev)
		lb.shadowLog.mu.Unlock()
	}
	for _, o := range lb.shadowObs {
		o(ev)
	}
}

// ShadowDiffs returns the last copies whose answers differed, newest last.
func (lb *LoadBalancer) ShadowDiffs() []ShadowEvent {
	lb.shadowLog.mu.Lock()
	defer lb.shadowLog.mu.Unlock()
	return append([]ShadowEvent(nil), lb.shadowLog.last...)
}
