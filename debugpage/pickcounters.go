package debugpage

import (
	"sync"
	"sync/atomic"

	"github.com/graylb/graylb"
)

// PickCounters counts picks by service, request kind and outcome, for the
// debug page. Install its Observe method as the LoadBalancer's Observer
// (graylb.WithObserver(c.Observe)), beside any other. It is safe for
// concurrent use, allocates nothing once a service has been seen, and
// keeps only the names the LoadBalancer tells its Observer: the services
// it knows and graylb.UnroutedService, so its memory stays bounded
// whatever names callers send.
type PickCounters struct {
	mu       sync.Mutex // serialises adding a service
	services atomic.Pointer[map[string]*pickCounts]
}

type pickCounts [2][4]atomic.Uint64 // by Kind, then Outcome

// NewPickCounters returns empty counters.
func NewPickCounters() *PickCounters {
	c := &PickCounters{}
	c.services.Store(&map[string]*pickCounts{})
	return c
}

// Observe counts one pick; it is a graylb.Observer. A kind or outcome it
// does not know is ignored.
func (c *PickCounters) Observe(service string, kind graylb.Kind, outcome graylb.Outcome) {
	if kind > graylb.Gray || outcome > graylb.Failed {
		return
	}
	p := (*c.services.Load())[service]
	if p == nil {
		p = c.add(service)
	}
	p[kind][outcome].Add(1)
}

func (c *PickCounters) add(service string) *pickCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.services.Load()
	if p := old[service]; p != nil {
		return p
	}
	m := make(map[string]*pickCounts, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	p := new(pickCounts)
	m[service] = p
	c.services.Store(&m)
	return p
}

// Counts returns the counts of service by request kind ("prod", "gray")
// and outcome ("selected", "fell_back", "bypassed", "failed"); nil when
// no pick of it was seen.
func (c *PickCounters) Counts(service string) map[string]map[string]uint64 {
	p := (*c.services.Load())[service]
	if p == nil {
		return nil
	}
	out := map[string]map[string]uint64{}
	for k := graylb.Prod; k <= graylb.Gray; k++ {
		m := map[string]uint64{}
		for o := graylb.Selected; o <= graylb.Failed; o++ {
			m[o.String()] = p[k][o].Load()
		}
		out[k.String()] = m
	}
	return out
}
