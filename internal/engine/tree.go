package engine

import (
	"context"
	"fmt"
	"sort"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/modulus"
	"github.com/graylb/graylb/internal/rotor"
)

// node is one node of the precomputed routing tree, one cache line (see
// package cacheline): a leaf's candidates and, when its policy is round robin,
// the turns of its rotation in place (see rotor.Turns: one counter word until
// its picks contend), so that the picks of one leaf write its own line
// and no other, and a flat pick reads one line per leaf; an inner node's
// stage and children, a leaf's picker of another policy and its Stats are
// behind ext (nil for a plain round-robin leaf). An inner node's instances
// are every candidate below it.
type node struct {
	instances []Instance
	t         rotor.Turns     // the round robin's turns (t.N: len(instances)), when ext holds no picker
	m         modulus.Modulus // for t.n
	ext       *nodeExt
}

// nodeExt is what a node holds beyond a round-robin leaf.
type nodeExt struct {
	nodeExtFields
	_ [cacheline.Size - unsafe.Sizeof(nodeExtFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// nodeExtFields are the fields of a nodeExt, which pads them to whole cache lines.
type nodeExtFields struct {
	stage    Stage    // an inner node's stage
	children []node   // an inner node's children, one array
	picker   Picker   // a leaf's picker; nil: the node's own round robin
	stats    []*Stats // beside instances, when the LoadBalancer keeps Stats
}

// isLeaf reports whether n has no stage.
func (n *node) isLeaf() bool { return n.ext == nil || n.ext.stage == nil }

// pickerOf returns the leaf's Picker: its policy's, or the node itself
// (its own round robin).
func (n *node) pickerOf() Picker {
	if e := n.ext; e != nil && e.picker != nil {
		return e.picker
	}
	return n
}

// next picks with the leaf's policy: its picker, or its own round robin
// on its turns.
func (n *node) next() int {
	if e := n.ext; e != nil && e.picker != nil {
		return e.picker.Next()
	}
	return int(n.m.Of(uint32(n.t.Next(uint64(n.t.N))), n.t.N))
}

// Next is next: a leaf without a policy's picker is its own Picker.
func (n *node) Next() int { return n.next() }

// statsOf returns the leaf's Stats, nil when none are kept.
func (n *node) statsOf() []*Stats {
	if n.ext == nil {
		return nil
	}
	return n.ext.stats
}

// emptyLeaf is the leaf of every empty subset of the gray decision: no
// candidate, so no route ever returns it, and no filter is built over
// nothing.
var emptyLeaf node

// tree is the immutable routing snapshot of one service: the gray decision
// at the root, one subtree of the user's filters per subset it yields.
type tree struct {
	treeFields
	_ [cacheline.Size - unsafe.Sizeof(treeFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// treeFields are the fields of a tree, which pads them to whole cache lines.
type treeFields struct {
	service string
	gray    grayDecision
	// plain: the rules classify no request (grayStage.plain) and the
	// only filter, if any, is a VersionFilter; tree.pick then walks flat,
	// with the gray key, the version filter's key and own version kept
	// here.
	plain       bool
	flat        [grayIdxAll + 1]flatRoute // by gray subset index, when plain
	grayKey     string
	versionKey  string
	versionSelf string
	children    [grayIdxAll + 1]*node // by gray subset index
	rules       *compiledRules        // the rules it was built with
	ejected     [2]int                // instances left out as outliers, by kind
}

// statsFunc returns an instance's Stats; nil when none are kept.
type statsFunc func(Instance) *Stats

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
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("graylb: building the routing of %q: filter panicked: %v", service, p)
		}
	}()
	gs := gray.build(instances, rules)
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

// grayLists returns the gray decision's lists (prod, gray, all), as the
// tree's subtrees hold them.
func (t *tree) grayLists() *grayStage {
	return &grayStage{grayStageFields: grayStageFields{prod: t.children[grayIdxProd].instances, gray: t.children[grayIdxGray].instances, all: t.children[grayIdxAll].instances}}
}

// holds reports whether leaf is one of t's leaves.
func (t *tree) holds(leaf *node) bool {
	var in func(n *node) bool
	in = func(n *node) bool {
		if n == leaf {
			return true
		}
		if n.isLeaf() {
			return false
		}
		for i := range n.ext.children {
			if in(&n.ext.children[i]) {
				return true
			}
		}
		return false
	}
	for _, n := range t.children {
		if in(n) {
			return true
		}
	}
	return false
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

// route walks the tree for one request. It returns the leaf (nil when a
// stage chose no subset or the leaf is empty), the request's kind, the
// outcome and the lane a match rule gave the request (the filters see it
// as Request.Lane).
func (t *tree) route(r *Request) (*node, decision) {
	i, d := t.gray.decide(r)
	r.lane = d.lane
	if n := walk(t.children[i], r); n != nil {
		return n, d
	}
	d.outcome = Failed
	return nil, d
}

// walk routes the request in ctx (not nil): it sets *d to the decision,
// tells observe (when not nil) what was decided, and returns the leaf
// whose candidates the request may reach, or the error of a request whose
// kind has no instance (the decision's outcome Failed). call (nil: none)
// reads the keys of an adapter's call, asked before h, the LoadBalancer's
// ContextHandlers. Every adapter's route walks it (the Transport, the gRPC
// picker, a framework's selector), and lb.Pick over a tree that is not
// plain; lb.Pick over a plain tree walks pick's copy of the flat walk.
//
// A plain tree (see tree.plain) is walked in its flat form: the request's
// own gray value (else the canary's draw recorded for the request being
// served) decides its kind, as decide does when no rule classifies
// requests, and its version picks the leaf; no Request is built.
func (t *tree) walk(ctx context.Context, call, h ContextHandler, observe Observer, d *decision) (*node, error) {
	n := t.leafOf(ctx, call, h, d)
	if observe != nil {
		observe(t.service, d.kind, d.outcome)
	}
	if n == nil {
		return nil, t.noInstance(d.kind)
	}
	return n, nil
}

// leafOf is walk's routing: the leaf, nil when the request's kind has
// none.
func (t *tree) leafOf(ctx context.Context, call, h ContextHandler, d *decision) *node {
	if !t.plain {
		var r Request
		r.init(ctx, t.service, h, valuesIn(ctx))
		r.call = call
		n, rd := t.route(&r)
		*d = rd
		return n
	}
	d.kind, d.source, d.outcome = Prod, FromKey, Selected
	v := ""
	if call != nil {
		v = call.Value(ctx, t.grayKey)
	}
	if v == "" && h != nil {
		v = h.Value(ctx, t.grayKey)
	}
	vals, st := valuesAndState(ctx)
	if v == "" && st != nil {
		v = st.Get(t.grayKey)
	}
	if v == "" {
		if v = vals.get(t.grayKey); v != "" {
			d.source = FromContext
		} else if gray, ok := st.Drawn(); ok {
			// another LoadBalancer's canary drew for the request
			d.source = FromRules
			if gray {
				v = "true"
			}
		} else {
			d.source = FromDefault
		}
	}
	i := grayIdxProd
	if IsGray(v) {
		d.kind, i = Gray, grayIdxGray
		if !t.gray.hasGray {
			i, d.outcome = grayIdxAll, FellBack
		}
	}
	fr := &t.flat[i]
	leaf := &fr.leaves[0]
	if len(fr.leaves) > 1 { // a version stage's leaves
		v = ""
		if call != nil {
			v = call.Value(ctx, t.versionKey)
		}
		if v == "" && h != nil {
			v = h.Value(ctx, t.versionKey)
		}
		if v == "" && st != nil {
			v = st.Get(t.versionKey)
		}
		if v == "" {
			v = vals.get(t.versionKey)
		}
		leaf = &fr.leaves[fr.choice.choose(v, t.versionSelf)]
	}
	if len(leaf.instances) == 0 {
		d.outcome = Failed
		return nil
	}
	return leaf
}

// pick is walk picking, for lb.Pick, with the flat form of a plain tree
// written out (lb.Pick's hot path: a call to leafOf costs a tenth of a
// pick): the same walk as leafOf's, which TestTree_FlatPickAgreesWithRoute holds
// equal to route's on random trees and requests. It returns the picked
// candidate in its leaf's list, or the error of a request whose kind has
// no instance.
func (t *tree) pick(ctx context.Context, h ContextHandler, observe Observer) (*Instance, error) {
	if !t.plain {
		var d decision
		n, err := t.walk(ctx, nil, h, observe, &d)
		if err != nil {
			return nil, err
		}
		return &n.instances[n.next()], nil
	}
	vals, st := valuesAndState(ctx)
	kind, outcome := Prod, Selected // what decided is not asked for
	v := ""
	if h != nil {
		v = h.Value(ctx, t.grayKey)
	}
	if v == "" && st != nil {
		v = st.Get(t.grayKey)
	}
	if v == "" {
		if v = vals.get(t.grayKey); v == "" && st != nil {
			if gray, _ := st.Drawn(); gray {
				v = "true" // another LoadBalancer's canary drew gray for the request
			}
		}
	}
	i := grayIdxProd
	if IsGray(v) {
		kind, i = Gray, grayIdxGray
		if !t.gray.hasGray {
			i, outcome = grayIdxAll, FellBack
		}
	}
	fr := &t.flat[i]
	n := &fr.leaves[0]
	if len(fr.leaves) > 1 { // a version stage's leaves
		v = ""
		if h != nil {
			v = h.Value(ctx, t.versionKey)
		}
		if v == "" && st != nil {
			v = st.Get(t.versionKey)
		}
		if v == "" {
			v = vals.get(t.versionKey)
		}
		n = &fr.leaves[fr.choice.choose(v, t.versionSelf)]
	}
	var in *Instance
	switch {
	case len(n.instances) == 0:
		outcome = Failed
	case n.ext == nil || n.ext.picker == nil:
		// node.next written out (it does not fit the inlining budget): the
		// single counter's turn (TryOne inlines), else the slow path.
		turn, ok := n.t.TryOne()
		if !ok {
			turn = n.t.Contended(uint64(n.t.N))
		}
		in = &n.instances[n.m.Of(uint32(turn), n.t.N)]
	default:
		in = &n.instances[n.ext.picker.Next()]
	}
	if observe != nil {
		observe(t.service, kind, outcome)
	}
	if in == nil {
		return nil, t.noInstance(kind)
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
	choice versionChoice // when versioned
	leaves []node        // by the version filter's subset; one when not versioned
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
