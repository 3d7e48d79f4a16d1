package graylb

import (
	"context"
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
	// tree is the tree the node belongs to (a route's leaf tells which
	// routing the route was built from: see reroute).
	tree *tree
	_    [16]byte // whole cache lines (see cacheLine)
}

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
func buildTree(service string, instances []Instance, gray *grayFilter, filters []ServerFilter, rules *compiledRules, policy Policy, stats statsFunc) (t *tree, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("graylb: building the routing of %q: filter panicked: %v", service, p)
		}
	}()
	gs := gray.build(instances, rules)
	t = &tree{service: service, gray: gs, rules: rules, grayKey: gray.header, anyGray: len(gs.gray) > 0}
	for i, sub := range gs.subsets() {
		t.children[i] = buildNode(t, BuildInfo{Service: service, Instances: sub}, filters, policy, stats)
	}
	if gs.plain && (len(filters) == 0 || len(filters) == 1 && isVersionFilter(filters[0])) {
		t.plain = true
		for i, n := range t.children {
			t.flat[i] = flatten(n)
		}
	}
	return t, nil
}

func buildNode(t *tree, in BuildInfo, filters []ServerFilter, policy Policy, stats statsFunc) *node {
	if len(filters) == 0 {
		n := newLeaf(in.Instances, policy, stats)
		n.tree = t
		return n
	}
	st := filters[0].Build(in)
	subs := st.Subsets()
	n := &node{stage: st, children: make([]*node, len(subs)), tree: t}
	for i, sub := range subs {
		child := in
		child.Instances = sub
		n.children[i] = buildNode(t, child, filters[1:], policy, stats)
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
			in = &leaf.instances[leaf.rr.Next()]
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
	leaves     []flatLeaf // by the version filter's subset; one when !versioned
}

// flatLeaf is a leaf's candidates and picker (rr when it is round robin).
type flatLeaf struct {
	instances []Instance
	picker    Picker
	rr        *roundRobin
}

func isVersionFilter(f ServerFilter) bool {
	_, ok := f.(*VersionFilter)
	return ok
}

func flatten(n *node) flatRoute {
	if n.stage == nil {
		fr := flatRoute{leaves: lineSlice[flatLeaf](1)}
		fr.leaves[0] = flatLeafOf(n)
		return fr
	}
	vs := n.stage.(*versionStage)
	fr := flatRoute{versioned: true, versionKey: vs.header, choice: vs.choice, leaves: lineSlice[flatLeaf](len(n.children))}
	for i, c := range n.children {
		fr.leaves[i] = flatLeafOf(c)
	}
	return fr
}

func flatLeafOf(n *node) flatLeaf {
	rr, _ := n.picker.(*roundRobin)
	return flatLeaf{instances: n.instances, picker: n.picker, rr: rr}
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
