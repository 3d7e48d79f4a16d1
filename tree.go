package graylb

import (
	"fmt"
	"sort"
)

// node is one node of the precomputed routing tree: an inner node holds a
// stage and one child per subset; a leaf holds the final candidates and
// their picker.
type node struct {
	stage     Stage
	children  []*node
	instances []Instance
	stats     []*Stats // beside instances, when the LoadBalancer keeps Stats
	picker    Picker
}

// tree is the immutable routing snapshot of one service: the gray decision
// at the root, one subtree of the user's filters per subset it yields.
type tree struct {
	gray     *grayStage
	children [grayIdxAll + 1]*node // by gray subset index
	rules    *compiledRules        // the rules it was built with
	ejected  [2]int                // instances left out as outliers, by kind
}

// statsFunc returns an instance's Stats; nil when none are kept.
type statsFunc func(Instance) *Stats

// buildTree builds the routing of service over the usable instances: the
// gray decision, then filters (sorted), then policy at each leaf. A filter
// that panics fails the build.
func buildTree(service string, instances []Instance, gray *grayFilter, filters []ServerFilter, rules *compiledRules, policy Policy, stats statsFunc) (t *tree, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("graylb: building the routing of %q: filter panicked: %v", service, p)
		}
	}()
	gs := gray.build(instances, rules)
	t = &tree{gray: gs, rules: rules}
	for i, sub := range gs.subsets() {
		t.children[i] = buildNode(BuildInfo{Service: service, Instances: sub}, filters, policy, stats)
	}
	return t, nil
}

func buildNode(in BuildInfo, filters []ServerFilter, policy Policy, stats statsFunc) *node {
	if len(filters) == 0 {
		return newLeaf(in.Instances, policy, stats)
	}
	st := filters[0].Build(in)
	subs := st.Subsets()
	n := &node{stage: st, children: make([]*node, len(subs))}
	for i, sub := range subs {
		child := in
		child.Instances = sub
		n.children[i] = buildNode(child, filters[1:], policy, stats)
	}
	return n
}

// newLeaf builds a leaf over list: its Stats, when kept, and its picker
// (a StatsPolicy's picker reads the Stats).
func newLeaf(list []Instance, policy Policy, stats statsFunc) *node {
	n := &node{instances: list}
	if stats != nil && len(list) > 0 {
		n.stats = make([]*Stats, len(list))
		for i, in := range list {
			if n.stats[i] = stats(in); n.stats[i] == nil {
				n.stats[i] = &Stats{} // not tracked (a list the table has not seen)
			}
		}
		if sp, ok := policy.(StatsPolicy); ok {
			n.picker = sp.NewStatsPicker(list, n.stats)
			return n
		}
	}
	n.picker = policy.NewPicker(list)
	return n
}

// route walks the tree for one request. It returns the leaf (nil when a
// stage chose no subset or the leaf is empty), the request's kind, the
// outcome and the lane a match rule gave the request (the filters see it
// as Request.Lane).
func (t *tree) route(r Request) (*node, decision) {
	i, d := t.gray.decide(r)
	r.lane = d.lane
	n := t.children[i]
	for n.stage != nil {
		i = n.stage.Choose(r)
		if i < 0 || i >= len(n.children) {
			d.outcome = Failed
			return nil, d
		}
		n = n.children[i]
	}
	if len(n.instances) == 0 {
		d.outcome = Failed
		return nil, d
	}
	return n, d
}

// sortFilters returns the user's filters by Order (stable, so equal orders
// keep the order they were given in), nil ones dropped.
func sortFilters(filters []ServerFilter) []ServerFilter {
	out := make([]ServerFilter, 0, len(filters))
	for _, f := range filters {
		if f != nil {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Order() < out[j].Order() })
	return out
}
