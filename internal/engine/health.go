package engine

import (
	"sync"
	"sync/atomic"
)

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
	bucket  int64          // half of cfg.RateWindow in nanoseconds; 0: no rate detection

	mu     sync.Mutex // guards ejection decisions and replacing the table
	table  atomic.Pointer[healthTable]
	window atomic.Int64 // when the current bucket of the rate window began, on the monotonic clock
	seq    uint64       // take-outs so far (guarded by mu)
	// events counts the ejections ([k][0]) and readmissions ([k][1]) of
	// instances of kind k since New, for Ejections: kept here, with the
	// service, and not in a table of the LoadBalancer's that would fill up
	// as ejections reach more services.
	events [2][2]atomic.Uint64
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
		s.remove()
	}
}

// remove marks s gone from the list and stops its timers; h.mu is held.
func (s *Stats) remove() {
	s.removed = true
	for k := range s.by {
		if sl := &s.by[k]; sl.stopTimer != nil {
			sl.stopTimer()
			sl.stopTimer = nil
		}
	}
}

func newHealth(service string, cfg *OutlierConfig, changed func()) *health {
	h := &health{service: service, cfg: cfg, changed: changed}
	if cfg != nil && cfg.RateWindow > 0 {
		h.bucket = max(int64(cfg.RateWindow/2), 1)
	}
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
			s.remove()
		}
	}
	h.table.Store(&healthTable{byAddr: m, byRaw: raw})
}

// statsOf returns inst's Stats (nil when it is not in the table).
func (h *health) statsOf(in Instance) *Stats { return h.table.Load().stats(in) }

// liveLists are the instance lists a service's routing is built over, for each
// kind of request: its instances but those out of rotation for that kind.
// Prod and Gray are one slice when no instance is out for one kind only.
type liveLists [2][]Instance

// live returns list without the instances out of rotation, for each kind
// of request (list itself when none is out), and how many instances of
// each kind are left out of some kind's list. Prod instances below the
// panic threshold for a kind of request keep their ejected ones (see
// OutlierConfig); gray instances keep theirs only when a gray request
// would find no usable instance at all, gray or prod: then each kind is
// routed over its own.
func (h *health) live(list []Instance) (liveLists, [2]int) {
	var ejected [2]int
	if h.cfg == nil {
		return liveLists{list, list}, ejected
	}
	t := h.table.Load()
	// total[K] and out[K][k]: instances of kind K, and those of them out
	// for requests of kind k.
	var total [2]int
	var out [2][2]int
	for _, in := range list {
		s := t.stats(in)
		if s == nil {
			total[Prod]++
			continue
		}
		K := kindOfGray(s.gray.Load())
		total[K]++
		for k := range s.by {
			if s.by[k].out.Load() {
				out[K][k]++
			}
		}
	}
	if out[Prod][Prod]+out[Prod][Gray]+out[Gray][Prod]+out[Gray][Gray] == 0 {
		return liveLists{list, list}, ejected
	}
	// keep[K][k]: instances of kind K out for requests of kind k stay in
	// that kind's list anyway (a panic).
	var keep [2][2]bool
	th := h.cfg.PanicThreshold
	for k := range keep[Prod] {
		keep[Prod][k] = out[Prod][k] > 0 && (total[Prod]-out[Prod][k])*100 < th*total[Prod]
	}
	keep[Gray][Gray] = total[Gray] > 0 && total[Gray] == out[Gray][Gray] && total[Prod] == out[Prod][Gray]
	var u liveLists
	same := true
	for k := range u {
		if (out[Prod][k] == 0 || keep[Prod][k]) && (out[Gray][k] == 0 || keep[Gray][k]) {
			u[k] = list
			continue
		}
		same = false
		l := make([]Instance, 0, len(list))
		for _, in := range list {
			if s := t.stats(in); s != nil && s.by[k].out.Load() && !keep[kindOfGray(s.gray.Load())][k] {
				continue
			}
			l = append(l, in)
		}
		u[k] = l
	}
	if same {
		return u, ejected
	}
	for _, in := range list {
		s := t.stats(in)
		if s == nil {
			continue
		}
		K := kindOfGray(s.gray.Load())
		for k := range s.by {
			if s.by[k].out.Load() && !keep[K][k] {
				ejected[K]++
				break
			}
		}
	}
	return u, ejected
}

func kindOfGray(gray bool) Kind {
	if gray {
		return Gray
	}
	return Prod
}
