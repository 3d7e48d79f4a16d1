package engine

import (
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

// nodeExtFields are the fields of a nodeExt, which pads them to whole cache
// lines.
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

// treeFields are the fields of a tree, which pads them to whole cache
// lines.
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

// flatRoute is a plain tree below one gray subset: the leaf, or the
// version filter's choice and its leaves, kept inline so that a pick
// follows few pointers.
type flatRoute struct {
	choice versionChoice // when versioned
	leaves []node        // by the version filter's subset; one when not versioned
}
