package engine

import (
	"fmt"
	"sort"
	"unsafe"
)

// buildTree builds the routing of service over the usable instances: the
// gray decision, then filters (sorted), then policy at each leaf. A filter
// that panics fails the build.
//
// An empty subset of the gray decision gets emptyLeaf. Every other subset
// gets a subtree of its own, even over the very list of another (every
// instance, when none is gray, is prod's list): a subtree holds its
// leaves' pick state (a round robin's turns), and two kinds of request
// taking turns from one rotation lock each other onto part of it (a caller
// alternating prod and gray requests would reach only every other
// instance with each kind). Such a subtree shares the other's version
// groupings (see freshCopy) rather than grouping the list again.
func buildTree(service string, instances []Instance, gray *grayFilter, filters []ServerFilter, rules *compiledRules, policy Policy, stats statsFunc) (t *tree, err error) {
	return buildLive(service, liveLists{instances, instances}, gray, filters, rules, policy, stats)
}

// buildLive is buildTree over the usable instances for each kind of
// request: prod requests route over lists[Prod], gray ones (and their
// fall-back to prod) over lists[Gray].
func buildLive(service string, lists liveLists, gray *grayFilter, filters []ServerFilter, rules *compiledRules, policy Policy, stats statsFunc) (t *tree, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("graylb: building the routing of %q: filter panicked: %v", service, p)
		}
	}()
	gs := gray.build(lists[Prod], rules)
	if !sameList(lists[Gray], lists[Prod]) {
		gs = mixed(gs, gray.build(lists[Gray], rules), rules)
	}
	t = &tree{treeFields: treeFields{service: service, gray: gs.decision(), rules: rules, grayKey: gray.header}}
	subs := gs.subsets()
	for i, sub := range subs {
		if len(sub) == 0 {
			t.children[i] = &emptyLeaf
			continue
		}
		n := &node{}
		in := BuildInfo{Service: service, Instances: sub}
		if prod := t.children[grayIdxProd]; i == grayIdxAll && sameList(sub, prod.instances) {
			// Every instance is prod's very list: its subtree's groupings,
			// with leaves of its own.
			freshCopy(n, prod, in, true, filters, policy, stats)
			t.children[i] = n
			continue
		}
		// When the gray decision's lists are the tree's own copy, a
		// VersionFilter right after it groups them in place.
		owned := gs.owned && i != grayIdxAll
		buildNode(n, in, owned, true, filters, policy, stats)
		t.children[i] = n
	}
	if gs.plain && (len(filters) == 0 || len(filters) == 1 && isVersionFilter(filters[0])) {
		t.plain = true
		for i, n := range t.children {
			t.flat[i] = flatten(n)
			if !n.isLeaf() {
				vs := n.ext.stage.(*versionStage)
				t.versionKey, t.versionSelf = vs.header, vs.self
			}
		}
	}
	return t, nil
}

// mixed is the gray decision whose prod requests route over p's lists and
// gray requests over g's: p's prod, g's gray, and g's fall-back to prod
// (with routing off, every request takes p's list of all). Neither list is
// the tree's own copy any more.
func mixed(p, g *grayStage, rl *compiledRules) *grayStage {
	p.gray = g.gray
	switch {
	case rl.closed:
	case !rl.enabled:
	case len(g.gray) == 0:
		p.all = g.prod
	default:
		p.all = nil
	}
	p.owned = false
	return p
}

// sameList reports whether a and b are one list (the same elements of the
// same array).
func sameList(a, b []Instance) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// freshCopy makes m, over in, a copy of n (built over the same list from
// filters) with pick state of its own: n's version stages and the lists
// they grouped are shared (they hold no pick state and are never written
// once built), any other stage is built again from the filters left, and
// every leaf gets a picker of its own. ownLine: m is on a cache line of
// its own.
func freshCopy(m, n *node, in BuildInfo, ownLine bool, filters []ServerFilter, policy Policy, stats statsFunc) {
	var vs *versionStage
	if !n.isLeaf() {
		vs, _ = n.ext.stage.(*versionStage)
	}
	if vs == nil { // a leaf, or a stage of the user's filters
		buildNode(m, in, false, ownLine, filters, policy, stats)
		return
	}
	m.instances = in.Instances
	kids := make([]node, len(n.ext.children))
	m.ext = &nodeExt{nodeExtFields: nodeExtFields{stage: vs, children: kids}}
	own := len(kids)*int(unsafe.Sizeof(node{})) <= 512 // as buildNode
	for i := range kids {
		child := in
		child.Instances = n.ext.children[i].instances
		freshCopy(&kids[i], &n.ext.children[i], child, own, filters[1:], policy, stats)
	}
}

// buildNode builds n over in: a leaf when no filter is left, else the
// first filter's stage with its children, one array of nodes. owned: the
// list is the tree's own, which a VersionFilter may reorder. ownLine: n
// is on a cache line of its own, where a round-robin leaf keeps its turns.
func buildNode(n *node, in BuildInfo, owned, ownLine bool, filters []ServerFilter, policy Policy, stats statsFunc) {
	n.instances = in.Instances
	if len(filters) == 0 {
		newLeaf(n, in.Instances, policy, stats, ownLine)
		return
	}
	var st Stage
	if vf, ok := filters[0].(*VersionFilter); ok && owned {
		st = vf.build(in, true)
	} else {
		st = filters[0].Build(in)
	}
	subs := st.Subsets()
	if vs, ok := st.(*versionStage); ok {
		vs.subsets = nil // read once, here (see Stage.Subsets)
	}
	kids := make([]node, len(subs))
	n.ext = &nodeExt{nodeExtFields: nodeExtFields{stage: st, children: kids}}
	// An array of up to 512 bytes of nodes has each on a cache line of its
	// own (see package cacheline); a longer one starts 8 bytes in.
	own := len(kids)*int(unsafe.Sizeof(node{})) <= 512
	for i, sub := range subs {
		child := in
		child.Instances = sub
		// A subset of an owned list that the stage grouped in place is a
		// run of the tree's list, which its other subsets share: not owned.
		buildNode(&kids[i], child, false, own, filters[1:], policy, stats)
	}
}

// newLeaf makes n a leaf over list: its Stats, when kept, and its picker
// (a StatsPolicy's picker reads the Stats). A round-robin picker's turns
// move into n when n is on a cache line of its own.
func newLeaf(n *node, list []Instance, policy Policy, stats statsFunc, ownLine bool) {
	n.instances = list
	if len(list) == 0 {
		return // never picked from: the routing skips empty leaves
	}
	var st []*Stats
	var p Picker
	if stats != nil {
		st = make([]*Stats, len(list))
		for i, in := range list {
			if st[i] = stats(in); st[i] == nil {
				st[i] = &Stats{} // not tracked (a list the table has not seen)
			}
		}
		if sp, ok := policy.(StatsPolicy); ok {
			p = sp.NewStatsPicker(list, st)
		}
	}
	if p == nil {
		p = policy.NewPicker(list)
	}
	if rr, ok := p.(*roundRobin); ok && ownLine {
		n.t.Adopt(&rr.t)
		n.m = rr.m
		p = nil
	}
	if p != nil || st != nil {
		n.ext = &nodeExt{nodeExtFields: nodeExtFields{picker: p, stats: st}}
	}
}

func isVersionFilter(f ServerFilter) bool {
	_, ok := f.(*VersionFilter)
	return ok
}

// flatten returns the flat form of n: n itself when it is a leaf, else
// its version stage's choice and the array of its leaves.
func flatten(n *node) flatRoute {
	if n.isLeaf() {
		return flatRoute{leaves: unsafe.Slice(n, 1)}
	}
	return flatRoute{choice: n.ext.stage.(*versionStage).choice, leaves: n.ext.children}
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
