package engine

import (
	"sort"
	"time"
)

// This file is the LoadBalancer's read-only view of itself, for operators:
// the debug page (package debugpage) and metrics (the otelgraylb module) read
// it. Nothing here is on the pick path, and nothing here changes routing.
//
// Its types are the one model of that view: the debug page shows them and
// serves them as JSON (their json tags), and a program that reads the
// page's JSON decodes it into them. Kinds are written "prod" and "gray",
// durations in nanoseconds under keys ending in Ns, times in RFC 3339, a
// time that never was as null.

// The subset names are graylb.SubsetProd and the others.
const (
	SubsetProd = "prod"
	SubsetGray = "gray"
	SubsetAll  = "all"
)

// ServiceState is graylb.ServiceState.
type ServiceState struct {
	Service string `json:"service"`
	// Instances are the instances routing knows (those the Cache kept:
	// healthy, enabled, weight > 0), in the supplier's order, prod first.
	Instances []InstanceState `json:"instances"`
	// Prod and Gray count the routable instances of each kind.
	Prod int `json:"prod"`
	Gray int `json:"gray"`
	// EjectedProd and EjectedGray count the instances of each kind that
	// outlier detection has ejected: they are listed in Instances (not
	// Usable, in no subset) and not counted in Prod and Gray.
	EjectedProd int `json:"ejectedProd"`
	EjectedGray int `json:"ejectedGray"`
	// GrayFallback: a gray request would be served by every instance,
	// as the service has no gray instance (routing on, not closed).
	GrayFallback bool `json:"grayFallback"`
}

// InstanceState is graylb.InstanceState.
type InstanceState struct {
	Addr    string  `json:"addr"`
	Kind    Kind    `json:"kind"`    // gray by its metadata or a gray address of the rules
	Version string  `json:"version"` // its metadata under the VersionFilter's key (default "version")
	Weight  float64 `json:"weight"`
	Cluster string  `json:"cluster"`
	// Usable: the instance may be picked (healthy, enabled, positive
	// weight, and not ejected).
	Usable bool `json:"usable"`
	// Stats is what the LoadBalancer knows of the instance's calls and
	// whether outlier detection ejected it; nil when it keeps no Stats
	// (no outlier detection and a policy that reads none) or the service
	// is one only its Cache follows.
	Stats *InstanceStats `json:"stats"`
	// Subsets are the subsets the instance lands in (SubsetProd,
	// SubsetGray, SubsetAll): which requests it can serve.
	Subsets []string `json:"subsets"`
	// Metadata is a copy of the instance's registry metadata: untrusted
	// text, escape it wherever it is shown.
	Metadata map[string]string `json:"metadata"`
}

// InstanceStats is graylb.InstanceStats.
type InstanceStats struct {
	// Ejected: outlier detection took the instance out of rotation.
	Ejected bool `json:"ejected"`
	// InFlight counts calls started and not yet done.
	InFlight int64 `json:"inFlight"`
	// Latency is the peak-EWMA latency estimate, decayed to now (0 before
	// the first result).
	Latency time.Duration `json:"latencyNs"`
	// Failures counts consecutive failed calls (kept with outlier
	// detection only).
	Failures int `json:"failures"`
}

func readStats(s *Stats) *InstanceStats {
	if s == nil {
		return nil
	}
	return &InstanceStats{Ejected: s.Ejected(), InFlight: s.InFlight(), Latency: s.Latency(), Failures: int(s.fails.Load())}
}

// Services is graylb.LoadBalancer.Services.
func (lb *LoadBalancer) Services() []string {
	t := lb.services.Load()
	var out []string
	t.each(func(e serviceEntry) { out = append(out, e.name) })
	for _, name := range lb.cache.services() {
		if t.get(name) == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// services returns the services whose first query succeeded.
func (c *Cache) services() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.entries))
	for name, e := range c.entries {
		if c.ready(e) {
			out = append(out, name)
		}
	}
	return out
}

// ready reports whether e was seeded without error.
func (c *Cache) ready(e *cacheEntry) bool {
	return e.seededOK() && e.err == nil && e.snap.Load() != nil
}

// For a picked service Snapshot reads the immutable routing tree in force,
// without a lock; for one only the Cache follows, it classifies the Cache's
// list under the rules in force.

// Snapshot is graylb.LoadBalancer.Snapshot.
func (lb *LoadBalancer) Snapshot(service string) (ServiceState, bool) {
	if s := lb.services.Load().get(service); s != nil {
		// The tree and the list it was built from, as one pair.
		s.mu.Lock()
		t, list := s.tree.Load(), s.list
		s.mu.Unlock()
		if t != nil {
			st := lb.snapshot(service, t.grayLists(), t.rules)
			if h := s.health; h != nil {
				lb.addStats(&st, h, list, t.rules)
			}
			return st, true
		}
	}
	lb.cache.mu.Lock()
	e := lb.cache.entries[service]
	lb.cache.mu.Unlock()
	if e == nil || !lb.cache.ready(e) {
		return ServiceState{}, false
	}
	rules := lb.rules.Load()
	return lb.snapshot(service, lb.gray.build(*e.snap.Load(), rules), rules), true
}

func (lb *LoadBalancer) snapshot(service string, gs *grayStage, rules *compiledRules) ServiceState {
	inAll := make(map[string]bool, len(gs.all))
	for _, in := range gs.all {
		inAll[in.Addr()] = true
	}
	st := ServiceState{Service: service, Prod: len(gs.prod), Gray: len(gs.gray),
		GrayFallback: len(gs.gray) == 0 && len(gs.all) > 0 && rules.enabled,
		Instances:    make([]InstanceState, 0, len(gs.prod)+len(gs.gray))}
	add := func(in Instance, kind Kind, subset string) {
		is := lb.instanceState(in, kind)
		is.Subsets = []string{subset}
		if inAll[is.Addr] {
			is.Subsets = append(is.Subsets, SubsetAll)
		}
		st.Instances = append(st.Instances, is)
	}
	for _, in := range gs.prod {
		add(in, Prod, SubsetProd)
	}
	for _, in := range gs.gray {
		add(in, Gray, SubsetGray)
	}
	return st
}

// addStats attaches the Stats of h to the routable instances of st, and
// lists the ejected instances of list after the routable ones of their
// kind.
func (lb *LoadBalancer) addStats(st *ServiceState, h *health, list []Instance, rules *compiledRules) {
	table := h.table.Load()
	byAddr := make(map[string]*Stats, len(list))
	for _, in := range list {
		byAddr[in.Addr()] = table.stats(in)
	}
	for i := range st.Instances {
		st.Instances[i].Stats = readStats(byAddr[st.Instances[i].Addr])
	}
	var ejected [2][]InstanceState
	for _, in := range list {
		s := table.stats(in)
		if s == nil || !s.Ejected() {
			continue
		}
		k := lb.gray.instanceKind(in, rules)
		is := lb.instanceState(in, k)
		is.Usable = false
		is.Subsets = []string{}
		is.Stats = readStats(s)
		ejected[k] = append(ejected[k], is)
	}
	if len(ejected[Prod])+len(ejected[Gray]) == 0 {
		return
	}
	st.EjectedProd, st.EjectedGray = len(ejected[Prod]), len(ejected[Gray])
	out := make([]InstanceState, 0, len(st.Instances)+st.EjectedProd+st.EjectedGray)
	out = append(out, st.Instances[:st.Prod]...)
	out = append(out, ejected[Prod]...)
	out = append(out, st.Instances[st.Prod:]...)
	out = append(out, ejected[Gray]...)
	st.Instances = out
}

// instanceState is in as routing sees it, with its metadata copied and no
// subset.
func (lb *LoadBalancer) instanceState(in Instance, kind Kind) InstanceState {
	versionKey := DefaultVersionKey
	for _, f := range lb.filters {
		if v, ok := f.(*VersionFilter); ok {
			versionKey = v.metaKey
		}
	}
	is := InstanceState{Addr: in.Addr(), Kind: kind, Weight: in.Weight, Cluster: in.Cluster, Usable: in.Usable(),
		Version: in.Metadata[versionKey], Metadata: make(map[string]string, len(in.Metadata))}
	for k, v := range in.Metadata {
		is.Metadata[k] = v
	}
	return is
}
