package engine

import "sync"

// testCounts counts picks by service, kind and outcome: an Observer for
// tests.
type testCounts struct {
	mu sync.Mutex
	n  map[string]*[2][4]uint64
}

func newTestCounts() *testCounts { return &testCounts{n: map[string]*[2][4]uint64{}} }

func (c *testCounts) Observe(service string, kind Kind, outcome Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.n[service]
	if p == nil {
		p = new([2][4]uint64)
		c.n[service] = p
	}
	p[kind][outcome]++
}

// Counts returns the counts of service by kind and outcome name; nil when
// none was seen.
func (c *testCounts) Counts(service string) map[string]map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.n[service]
	if p == nil {
		return nil
	}
	out := map[string]map[string]uint64{}
	for k := Prod; k <= Gray; k++ {
		m := map[string]uint64{}
		for o := Selected; o <= Failed; o++ {
			m[o.String()] = p[k][o]
		}
		out[k.String()] = m
	}
	return out
}
