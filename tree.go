package graylb

import (
	"context"
	"fmt"
	"sort"
	"unsafe"
)

// node is one node of the precomputed routing tree: an inner node holds a
// stage and one child per subset; a leaf holds the final candidates and
// their picker. The children of a stage are one array of nodes (the flat
// walk indexes it directly: see flatten).
type node struct {
	stage     Stage
	children  []*node
	instances []Instance
	stats     []*Stats // beside instances, when the LoadBalancer keeps Stats
	picker    Picker
	rr        *roundRobin // picker, when it is round robin (tree.pick runs it inline)
	// tree is the tree the node belongs to (a Route's leaf tells which
	// routing the Route was built from: see LoadBalancer.Reroute).
	tree *tree
	_    [8]byte // whole cache lines (see cacheLine)
}

// emptyLeaf is the leaf of every empty subset of the gray decision: no
// candidate, so no route ever returns it (nor reads its tree), and no
// filter is built over nothing.
var emptyLeaf = node{picker: onlyPicker{}}

// tree is the immutable routing snapshot of one service: the gray decision
// at the root, one subtree of the user's filters per subset it yields.
type tree struct {
	service string
	gray    *grayStage
	// plain: the rules classify no request (grayStage.plain) and the
	// only filter, if any, is a VersionFilter; tree.pick then walks flat,
	// with the gray key and whether any instance is gray kept here.
	plain    bool
	flat     [grayIdxAll + 1]flatRoute // by gray subset index, when plain
	grayKey  string
	anyGray  bool
	children [grayIdxAll + 1]*node // by gray subset index
	rules    *compiledRules        // the rules it was built with
	ejected  [2]int                // instances left out as outliers, by kind
	_        [cacheLine / 2]byte   // whole cache lines (see cacheLine)
}

// statsFunc returns an instance's Stats; nil when none are kept.
type statsFunc func(Instance) *Stats

// buildTree builds the routing of service over the usable instances: the
// gray decision, then filters (sorted), then policy at each leaf. A filter
// that panics fails the build.
//
// An empty subset of the gray decision gets emptyLeaf, and a subset equal
// to one already built (every instance, when none is gray) shares its
// subtree.
func buildTree(service string, instances []Instance, gray *grayFilter, filters []ServerFilter, rules *compiledRules, policy Policy, stats statsFunc) (t *tree, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("graylb: building the routing of %q: filter panicked: %v", service, p)
		}
	}()
	gs := gray.build(instances, rules)
	t = &tree{service: service, gray: gs, rules: rules, grayKey: gray.header, anyGray: len(gs.gray) > 0}
	subs := gs.subsets()
	for i, sub := range subs {
		switch {
		case len(sub) == 0:
			t.children[i] = &emptyLeaf
			continue
		case i == grayIdxAll && sameList(sub, subs[grayIdxProd]):
			t.children[i] = t.children[grayIdxProd]
			continue
		}
		n := &node{}
		// The gray decision's lists are the tree's own: a VersionFilter
		// right after it groups them in place.
		buildNode(n, t, BuildInfo{Service: service, Instances: sub}, true, filters, policy, stats)
		t.children[i] = n
	}
	if gs.plain && (len(filters) == 0 || len(filters) == 1 && isVersionFilter(filters[0])) {
		t.plain = true
		for i, n := range t.children {
			t.flat[i] = flatten(n)
		}
	}
	return t, nil
}

// sameList reports whether a and b are one list (the same elements of the
// same array).
func sameList(a, b []Instance) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// buildNode builds n over in: a leaf when no filter is left, else the
// first filter's stage with its children, one array of nodes. owned: the
// list is the tree's own, which a VersionFilter may reorder.
func buildNode(n *node, t *tree, in BuildInfo, owned bool, filters []ServerFilter, policy Policy, stats statsFunc) {
	n.tree = t
	if len(filters) == 0 {
		newLeaf(n, in.Instances, policy, stats)
		return
	}
	var st Stage
	if vf, ok := filters[0].(*VersionFilter); ok && owned {
		st = vf.build(in, true)
	} else {
		st = filters[0].Build(in)
	}
	subs := st.Subsets()
	n.stage = st
	n.children = make([]*node, len(subs))
	kids := make([]node, len(subs))
	for i, sub := range subs {
		child := in
		child.Instances = sub
		n.children[i] = &kids[i]
		// A subset of an owned list that the stage grouped in place is a
		// run of the tree's list, which its other subsets share: not owned.
		buildNode(&kids[i], t, child, false, filters[1:], policy, stats)
	}
}

// newLeaf makes n a leaf over list: its Stats, when kept, and its picker
// (a StatsPolicy's picker reads the Stats).
func newLeaf(n *node, list []Instance, policy Policy, stats statsFunc) {
	n.instances = list
	if stats != nil && len(list) > 0 {
		n.stats = make([]*Stats, len(list))
		for i, in := range list {
			if n.stats[i] = stats(in); n.stats[i] == nil {
				n.stats[i] = &Stats{} // not tracked (a list the table has not seen)
			}
		}
		if sp, ok := policy.(StatsPolicy); ok {
			n.picker = sp.NewStatsPicker(list, n.stats)
			return
		}
	}
	n.picker = policy.NewPicker(list)
	n.rr, _ = n.picker.(*roundRobin)
}

// route walks the tree for one request. It returns the leaf (nil when a
// stage chose no subset or the leaf is empty), the request's kind, the
// outcome and the lane a match rule gave the request (the filters see it
// as Request.Lane).
func (t *tree) route(r *Request) (*node, decision) {
	i, d := t.gray.decide(r)
	r.lane = d.lane
	n := t.children[i]
	for n.stage != nil {
		i = n.stage.Choose(*r)
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

// pick is route followed by the leaf's policy for the call in ctx (not
// nil), on every pick's path: it tells observe (when not nil) what was
// decided and returns the picked candidate in its leaf's list, or the
// error of a request whose kind has no instance. It agrees with route on
// every request.
//
// A plain tree (see tree.plain) is walked in its flat form: the request's
// own gray value decides its kind, as decide does when no rule classifies
// requests, its version picks the leaf, and round robin picks without a
// call; no Request is built.
func (t *tree) pick(ctx context.Context, h ContextHandler, observe Observer) (*Instance, error) {
	vals := valuesIn(ctx)
	var in *Instance
	var d decision
	if !t.plain {
		var r Request
		r.init(ctx, t.service, h, vals)
		var n *node
		if n, d = t.route(&r); n != nil {
			in = &n.instances[n.picker.Next()]
		}
	} else {
		d = decision{kind: Prod, outcome: Selected} // what decided is not asked for
		v := ""
		if h != nil {
			v = h.Value(ctx, t.grayKey)
		}
		if v == "" {
			v = vals.get(t.grayKey)
		}
		i := grayIdxProd
		if IsGray(v) {
			d.kind, i = Gray, grayIdxGray
			if !t.anyGray {
				i, d.outcome = grayIdxAll, FellBack
			}
		}
		fr := &t.flat[i]
		leaf := &fr.leaves[0]
		if fr.versioned {
			v = ""
			if h != nil {
				v = h.Value(ctx, fr.versionKey)
			}
			if v == "" {
				v = vals.get(fr.versionKey)
			}
			leaf = &fr.leaves[fr.choice.choose(v)]
		}
		switch {
		case len(leaf.instances) == 0:
			d.outcome = Failed
		case leaf.rr != nil:
			// roundRobin.Next written out (it does not fit the inlining
			// budget): the single counter's turn, else the slow path.
			rr := leaf.rr
			turn := rr.t.one.Load()
			if turn >= turnsSharded || !rr.t.one.CompareAndSwap(turn, turn+1) {
				turn = rr.t.contended()
			}
			in = &leaf.instances[rr.m.of(uint32(turn), rr.n)]
		default:
			in = &leaf.instances[leaf.picker.Next()]
		}
	}
	if observe != nil {
		observe(t.service, d.kind, d.outcome)
	}
	if in == nil {
		return nil, t.noInstance(d.kind)
	}
	return in, nil
}

// noInstance is the error of a request of kind that t has no instance for.
func (t *tree) noInstance(kind Kind) error {
	e := &NoInstanceError{Service: t.service, Kind: kind, Ejected: t.ejected[Prod]}
	if kind == Gray {
		e.Ejected += t.ejected[Gray]
	}
	return e
}

// flatRoute is a plain tree below one gray subset: the leaf, or the
// version filter's choice and its leaves, kept inline so that a pick
// follows few pointers.
type flatRoute struct {
	versioned  bool // a VersionFilter follows the gray decision
	versionKey string
	choice     versionChoice
	leaves     []node // by the version filter's subset; one when !versioned
}

func isVersionFilter(f ServerFilter) bool {
	_, ok := f.(*VersionFilter)
	return ok
}

// flatten returns the flat form of n: n itself when it is a leaf, else
// its version stage and the array of its leaves (see buildNode).
func flatten(n *node) flatRoute {
	if n.stage == nil {
		return flatRoute{leaves: unsafe.Slice(n, 1)}
	}
	vs := n.stage.(*versionStage)
	return flatRoute{versioned: true, versionKey: vs.header, choice: vs.choice, leaves: unsafe.Slice(n.children[0], len(n.children))}
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
