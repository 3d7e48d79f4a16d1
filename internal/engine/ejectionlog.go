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
	for _, s := range lb.services.Load().all() {
		if t := s.tree.Load(); t != nil {
			st.Ejected += t.ejected[Prod] + t.ejected[Gray]
		}
	}
	return st
}

// ejectionLog counts ejections and readmissions for Ejections. It holds
// one entry per service and kind that had one: services the LoadBalancer
// routes, so it is as bounded as they are.
type ejectionLog struct {
	mu     sync.Mutex
	counts map[ejectionKey]*[2]uint64 // ejections, readmissions
	total  [2]uint64
	last   *Ejection
}

type ejectionKey struct {
	service string
	kind    Kind
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
	if l.counts == nil {
		l.counts = map[ejectionKey]*[2]uint64{}
	}
	k := ejectionKey{e.Service, e.Kind}
	c := l.counts[k]
	if c == nil {
		c = new([2]uint64)
		l.counts[k] = c
	}
	c[i]++
	l.total[i]++
	l.last = &e
}

func (l *ejectionLog) state(enabled bool) EjectionsState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := EjectionsState{Enabled: enabled, Ejections: l.total[0], Readmissions: l.total[1],
		Counts: make([]EjectionCount, 0, len(l.counts))}
	if l.last != nil {
		e := *l.last
		st.Last = &e
	}
	for k, c := range l.counts {
		st.Counts = append(st.Counts, EjectionCount{Service: k.service, Kind: k.kind, Ejections: c[0], Readmissions: c[1]})
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
