package shadow

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
)

// Defaults of a Mirror's options.
const (
	DefaultConcurrency  = 16
	DefaultMaxBody      = 64 << 10
	DefaultCopyTimeout  = 5 * time.Second
	DefaultNoiseSample  = 0.2
	DefaultLatencyRatio = 3.0
	DefaultLatencySlack = 50 * time.Millisecond
	maxRoutes           = 256 // routes a Mirror tells apart (and learns noise for); past it, "other"
	maxNoisePaths       = 64  // paths learned per route
)

// Option configures a Mirror.
type Option func(*Mirror)

// WithConcurrency bounds the copies in flight (default 16): a copy that
// does not fit is not sent (Dropped).
func WithConcurrency(n int) Option {
	return func(m *Mirror) {
		if n > 0 {
			m.concurrency = n
		}
	}
}

// WithMaxBody bounds the bytes of each answer kept to compare (default 64
// KiB): a longer body is compared by status and latency alone.
func WithMaxBody(n int) Option {
	return func(m *Mirror) {
		if n > 0 {
			m.maxBody = n
		}
	}
}

// WithCopyTimeout bounds each copy (default 5 s).
func WithCopyTimeout(d time.Duration) Option {
	return func(m *Mirror) {
		if d > 0 {
			m.copyTimeout = d
		}
	}
}

// WithIgnore names JSON paths not compared ("ts", "items[*].id", "meta",
// "*.etag": keys joined with ".", "[*]" for any array element, "*" for any
// one key; a path covers what is below it).
func WithIgnore(paths ...string) Option {
	return func(m *Mirror) { m.ignore = append(m.ignore, paths...) }
}

// WithNoiseSample sets the share of mirrored calls (0-1, default 0.2) also
// sent to a second prod instance: the paths at which two prod answers to
// one request differ (time stamps, ids) are learned as noise and not
// counted against gray, as Diffy does. A noise sample is marked like a
// copy (adapter.SampleValue): it routes as prod, its writes are refused on
// every hop. Until two prod answers of a route
// have been compared, every mirrored call of it is also sent to a second
// prod instance (unless p is 0): no copy is compared before its route's
// noise could be learned.
func WithNoiseSample(p float64) Option {
	return func(m *Mirror) {
		if p >= 0 && p <= 1 {
			m.noiseSample = p
		}
	}
}

// WithLatency sets when a copy's latency differs: above ratio × the
// primary's + slack (defaults 3 and 50 ms).
func WithLatency(ratio float64, slack time.Duration) Option {
	return func(m *Mirror) {
		if ratio > 0 {
			m.ratio = ratio
		}
		if slack >= 0 {
			m.slack = slack
		}
	}
}

// Mirror decides which calls to mirror, bounds the copies in flight,
// compares answers and tells the LoadBalancer's shadow observers. An
// adapter holds one (httpctx's Transport, grpcctx's interceptors); it is
// safe for concurrent use.
type Mirror struct {
	lb          *engine.LoadBalancer
	concurrency int
	maxBody     int
	copyTimeout time.Duration
	ignore      []string
	noiseSample float64
	ratio       float64
	slack       time.Duration

	inFlight atomic.Int64
	mu       sync.Mutex
	noise    map[string]map[string]bool // route key → patterns learned
	routes   map[string]bool            // route key → two prod answers of it compared (bounded)
}

// NewMirror returns a Mirror for lb's adapters.
func NewMirror(lb *graylb.LoadBalancer, opts ...Option) *Mirror {
	m := &Mirror{lb: (*engine.LoadBalancer)(lb), concurrency: DefaultConcurrency, maxBody: DefaultMaxBody,
		copyTimeout: DefaultCopyTimeout, noiseSample: DefaultNoiseSample, ratio: DefaultLatencyRatio, slack: DefaultLatencySlack,
		noise: map[string]map[string]bool{}, routes: map[string]bool{}}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	return m
}

// MaxBody is the bytes of an answer kept to compare.
func (m *Mirror) MaxBody() int { return m.maxBody }

// CopyTimeout is how long a copy may take.
func (m *Mirror) CopyTimeout() time.Duration { return m.copyTimeout }

// Drawn draws whether to mirror a prod call (the rules' ShadowPercent):
// nothing is allocated and no lock taken.
func (m *Mirror) Drawn() bool { return m != nil && m.lb.ShadowDraw() }

// Begin starts mirroring a drawn call of service by route (see HTTPRoute)
// and returns its Ticket when the bounds allow; nil otherwise, told as
// Dropped. A Ticket must be given the primary's and the copy's answers
// (and a second prod answer when it asks for one); it gives up on those
// that do not come within twice the copy timeout and a second.
func (m *Mirror) Begin(service, route string) *Ticket {
	route, sampled := m.bounded(service, route)
	if m.inFlight.Add(1) > int64(m.concurrency) {
		m.inFlight.Add(-1)
		m.lb.Shadowed(Event{Service: service, Route: route, Outcome: Dropped})
		return nil
	}
	t := &Ticket{m: m, service: service, route: route, prod2: m.noiseSample > 0 && (!sampled || rand.Float64() < m.noiseSample)}
	t.need = 2
	if t.prod2 {
		t.need = 3
	}
	t.timer = time.AfterFunc(2*m.copyTimeout+time.Second, t.giveUp)
	return t
}

// bounded returns route, or "other" once the Mirror knows maxRoutes
// routes of other names: the routes an observer counts by stay few,
// whatever paths callers send; and whether two prod answers of it have
// been compared.
func (m *Mirror) bounded(service, route string) (string, bool) {
	key := service + " " + route
	m.mu.Lock()
	defer m.mu.Unlock()
	if sampled, ok := m.routes[key]; ok {
		return route, sampled
	}
	if len(m.routes) >= maxRoutes {
		// One more entry per service (a service the LoadBalancer routes):
		// whether its other routes have been sampled.
		route, key = "other", service+" other"
		sampled, ok := m.routes[key]
		if !ok {
			m.routes[key] = false
		}
		return route, sampled
	}
	m.routes[key] = false
	return route, false
}

// Ticket is one mirrored call, from Mirror.Start until its answers are in.
type Ticket struct {
	m              *Mirror
	service, route string
	prod2          bool
	timer          *time.Timer

	mu                    sync.Mutex
	need                  int
	done                  bool
	primary, copy, second *Answer
}

// WantsSecondProd reports whether the adapter also sends the call to a
// second prod instance (a noise sample) and gives its answer to Second.
func (t *Ticket) WantsSecondProd() bool { return t.prod2 }

// Primary gives the primary's answer.
func (t *Ticket) Primary(a Answer) { t.give(&t.primary, a) }

// Copy gives the copy's answer (from a gray instance).
func (t *Ticket) Copy(a Answer) { t.give(&t.copy, a) }

// Second gives the second prod answer.
func (t *Ticket) Second(a Answer) { t.give(&t.second, a) }

func (t *Ticket) give(slot **Answer, a Answer) {
	t.mu.Lock()
	if t.done || *slot != nil {
		t.mu.Unlock()
		return
	}
	*slot = &a
	t.need--
	ready := t.need == 0
	if ready {
		t.done = true
	}
	t.mu.Unlock()
	if ready {
		t.timer.Stop()
		t.finish()
	}
}

// giveUp ends a ticket whose answers did not all come.
func (t *Ticket) giveUp() {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	t.done = true
	t.mu.Unlock()
	t.finish()
}

// finish compares what came and tells the observers.
func (t *Ticket) finish() {
	defer t.m.inFlight.Add(-1)
	m := t.m
	ev := Event{Service: t.service, Route: t.route, Primary: t.primary, Copy: t.copy}
	if t.primary != nil && t.second != nil && t.primary.Err == "" && t.second.Err == "" {
		if learned := m.learn(t.service, t.route, t.primary, t.second); len(learned) > 0 {
			m.lb.Shadowed(Event{Service: t.service, Route: t.route, Outcome: Noise, Paths: learned, Primary: t.primary, Copy: t.second})
		}
	}
	switch {
	case t.primary == nil || t.primary.Err != "":
		return // nothing to compare with: the primary failed or was abandoned
	case t.copy == nil || t.copy.Err != "":
		ev.Outcome = Failed
	default:
		p, c := t.primary, t.copy
		ev.Status = p.Status != c.Status
		ev.Latency = float64(c.Latency) > m.ratio*float64(p.Latency)+float64(m.slack)
		if !ev.Status && p.Body != nil && c.Body != nil {
			same, paths := sameBody(p.Body, c.Body, func(path string) bool { return m.ignored(t.service, t.route, path, t.second, p) })
			ev.Body, ev.Paths = !same, paths
		}
		ev.Outcome = Same
		if ev.Status || ev.Latency || ev.Body {
			ev.Outcome = Differs
		}
	}
	m.lb.Shadowed(ev)
}

// ignored reports whether path is not compared: the user's patterns, the
// noise learned for the route, and, when this call had a second prod
// answer, a path at which the two prod answers differ.
func (m *Mirror) ignored(service, route, path string, second, primary *Answer) bool {
	for _, p := range m.ignore {
		if matches(p, path) {
			return true
		}
	}
	m.mu.Lock()
	learned := m.noise[service+" "+route][pattern(path)]
	m.mu.Unlock()
	if learned {
		return true
	}
	if second != nil && second.Body != nil {
		if paths, ok := diffJSON(primary.Body, second.Body); ok {
			for _, p := range paths {
				if p == path {
					return true
				}
			}
		}
	}
	return false
}

// learn records the patterns at which two prod answers to one request
// differ, and returns those new to the route; then, the route's noise
// known, that two of its prod answers have been compared.
func (m *Mirror) learn(service, route string, a, b *Answer) []string {
	key := service + " " + route
	var paths []string
	ok := a.Status == b.Status && a.Body != nil && b.Body != nil
	if ok {
		paths, ok = diffJSON(a.Body, b.Body)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, known := m.routes[key]; known {
		defer func() { m.routes[key] = true }()
	}
	if !ok || len(paths) == 0 {
		return nil
	}
	set := m.noise[key]
	if set == nil {
		if len(m.noise) >= maxRoutes {
			return nil
		}
		set = map[string]bool{}
		m.noise[key] = set
	}
	var out []string
	for _, p := range paths {
		if q := pattern(p); !set[q] && len(set) < maxNoisePaths {
			set[q] = true
			out = append(out, q)
		}
	}
	return out
}
