package graylb

import (
	"fmt"
	"sort"
)

// ServerFilter narrows the candidate instances for a request. It is
// ordered: lower Order runs first (like Spring's Ordered); the GrayFilter
// has HighestPrecedence and always runs first.
//
// Filtering is split in two so that a pick costs O(1): Build runs once per
// instance-list (or rules) change and partitions the candidates into the
// subsets the filter can yield; the Stage's Choose runs per request and only
// names one of those subsets. The next filter in the chain is built over
// each subset in turn.
type ServerFilter interface {
	Order() int
	Build(in BuildInfo) Stage
}

// BuildInfo is what a filter is built over.
type BuildInfo struct {
	Service   string
	Instances []Instance // the candidates that reach this filter; read-only

	rules *compiledRules
}

// Stage is a filter built over one candidate list.
type Stage interface {
	// Subsets returns the candidate lists the stage can choose from. It is
	// called once, right after Build.
	Subsets() [][]Instance
	// Choose returns the index of the subset for the request. It runs on
	// every pick: it must not block and should not allocate. An index out
	// of range means no instance.
	Choose(r Request) int
}

// node is one node of the precomputed routing tree: an inner node holds a
// stage and one child per subset; a leaf holds the final candidates and
// their picker.
type node struct {
	stage     Stage
	children  []*node
	instances []Instance
	picker    Picker
}

// tree is the immutable routing snapshot of one service.
type tree struct {
	root  *node
	gray  *grayStage     // root.stage, held concretely for the kind and outcome
	rules *compiledRules // the rules it was built with
}

// buildTree runs the filters over the usable instances. filters[0] is the
// GrayFilter.
func buildTree(service string, instances []Instance, filters []ServerFilter, rules *compiledRules, policy Policy) (t *tree, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("graylb: building the routing of %q: filter panicked: %v", service, p)
		}
	}()
	root := buildNode(BuildInfo{Service: service, Instances: instances, rules: rules}, filters, policy)
	gs, _ := root.stage.(*grayStage)
	if gs == nil {
		return nil, fmt.Errorf("graylb: building the routing of %q: first filter is not the gray filter", service)
	}
	return &tree{root: root, gray: gs, rules: rules}, nil
}

func buildNode(in BuildInfo, filters []ServerFilter, policy Policy) *node {
	if len(filters) == 0 {
		return &node{instances: in.Instances, picker: policy.NewPicker(in.Instances)}
	}
	st := filters[0].Build(in)
	subs := st.Subsets()
	n := &node{stage: st, children: make([]*node, len(subs))}
	for i, sub := range subs {
		child := in
		child.Instances = sub
		n.children[i] = buildNode(child, filters[1:], policy)
	}
	return n
}

// route walks the tree for one request. It returns the leaf (nil when a
// stage chose no subset), the request's kind and the outcome.
func (t *tree) route(r Request) (*node, Kind, Outcome) {
	i, kind, outcome := t.gray.decide(r)
	n := t.root.children[i]
	for n.stage != nil {
		i = n.stage.Choose(r)
		if i < 0 || i >= len(n.children) {
			return nil, kind, NoInstance
		}
		n = n.children[i]
	}
	if len(n.instances) == 0 {
		return nil, kind, NoInstance
	}
	return n, kind, outcome
}

// sortFilters returns the chain: gray first, then the others by Order
// (stable, so equal orders keep the order they were given in).
func sortFilters(gray *GrayFilter, others []ServerFilter) []ServerFilter {
	chain := make([]ServerFilter, 0, len(others)+1)
	chain = append(chain, gray)
	for _, f := range others {
		if f == nil {
			continue
		}
		if g, ok := f.(*GrayFilter); ok && g == gray {
			continue
		}
		chain = append(chain, f)
	}
	rest := chain[1:]
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].Order() < rest[j].Order() })
	return chain
}
