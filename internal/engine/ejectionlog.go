package engine

import (
	"sort"
	"sync"
)

// EjectionsState is graylb.EjectionsState.
type EjectionsState struct {
	// Enabled: outlier detection is on (WithOutlierDetection).
	Enabled bool `json:"enabled"`
	// Ejected counts the instances ejected now, over every routed
	// service (which ones: each service's Snapshot).
	Ejected int `json:"ejected"`
	// Ejections and Readmissions count every ejection and readmission
	// since New.
	Ejections    uint64 `json:"ejections"`
	Readmissions uint64 `json:"readmissions"`
	// Counts are the same counts by service and kind, sorted by service,
	// then kind.
	Counts []EjectionCount `json:"counts"`
	// Last is the last ejection or readmission (nil: none).
	Last *Ejection `json:"last"`
}

// EjectionCount is graylb.EjectionCount.
type EjectionCount struct {
	Service      string `json:"service"`
	Kind         Kind   `json:"kind"`
	Ejections    uint64 `json:"ejections"`
	Readmissions uint64 `json:"readmissions"`
}

// Ejections is graylb.LoadBalancer.Ejections.
func (lb *LoadBalancer) Ejections() EjectionsState {
	st := lb.ejectionLog.state(lb.outlier != nil)
	st.Counts = []EjectionCount{}
	for _, s := range lb.services.Load().all() {
		if t := s.tree.Load(); t != nil {
			st.Ejected += t.ejected[Prod] + t.ejected[Gray]
		}
		if h := s.health; h != nil {
			for k := range h.events {
				if e, r := h.events[k][0].Load(), h.events[k][1].Load(); e+r > 0 {
					st.Counts = append(st.Counts, EjectionCount{Service: s.name, Kind: Kind(k), Ejections: e, Readmissions: r})
				}
			}
		}
	}
	sort.Slice(st.Counts, func(i, j int) bool {
		a, b := st.Counts[i], st.Counts[j]
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		return a.Kind < b.Kind
	})
	return st
}

// ejectionLog counts ejections and readmissions for Ejections, and keeps
// the last one; the counts by service and kind are kept with each
// service's Stats (health.events).
type ejectionLog struct {
	mu    sync.Mutex
	total [2]uint64
	last  *Ejection
}

// wrap returns a copy of cfg whose OnEjection records each event in l
// before calling cfg's own (nil for a nil cfg).
func (l *ejectionLog) wrap(cfg *OutlierConfig) *OutlierConfig {
	if cfg == nil {
		return nil
	}
	c := *cfg
	next := cfg.OnEjection
	c.OnEjection = func(e Ejection) {
		l.record(e)
		if next != nil {
			next(e)
		}
	}
	return &c
}

func (l *ejectionLog) record(e Ejection) {
	i := 0 // ejection
	if e.For == 0 {
		i = 1 // readmission
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total[i]++
	l.last = &e
}

func (l *ejectionLog) state(enabled bool) EjectionsState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := EjectionsState{Enabled: enabled, Ejections: l.total[0], Readmissions: l.total[1]}
	if l.last != nil {
		e := *l.last
		st.Last = &e
	}
	return st
}
