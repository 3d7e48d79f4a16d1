package engine

import (
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/routestate"
)

// VersionFilter is filter.VersionFilter.
type VersionFilter struct {
	header  string
	metaKey string
	self    string
	order   int
}

// VersionOption is filter.VersionOption.
type VersionOption func(*VersionFilter)

// WithVersionHeader is filter.WithVersionHeader.
func WithVersionHeader(name string) VersionOption {
	return func(f *VersionFilter) {
		if name != "" {
			f.header = name
		}
	}
}

// WithVersionKey is filter.WithVersionKey.
func WithVersionKey(key string) VersionOption {
	return func(f *VersionFilter) {
		if key != "" {
			f.metaKey = key
		}
	}
}

// WithSelfVersion is filter.WithSelfVersion.
func WithSelfVersion(v string) VersionOption { return func(f *VersionFilter) { f.self = v } }

// WithVersionOrder is filter.WithVersionOrder.
func WithVersionOrder(order int) VersionOption { return func(f *VersionFilter) { f.order = order } }

// NewVersionFilter is filter.Version.
func NewVersionFilter(opts ...VersionOption) *VersionFilter {
	f := &VersionFilter{header: DefaultVersionHeader, metaKey: DefaultVersionKey, order: 100}
	for _, o := range opts {
		if o != nil {
			o(f)
		}
	}
	return f
}

// Order returns the filter's order.
func (f *VersionFilter) Order() int { return f.order }

// Build groups the candidates by version.
func (f *VersionFilter) Build(in BuildInfo) Stage { return f.build(in, false) }

// build is Build. inPlace: in.Instances is the routing tree's own list,
// which build reorders so that each version's candidates are a run of it
// (the unversioned first, then the versions in the order they first
// appear, each in list order), instead of copying them into a new one.
func (f *VersionFilter) build(in BuildInfo, inPlace bool) *versionStage {
	// Two passes: count each group, then lay the groups out in one array.
	st := &versionStage{versionStageFields: versionStageFields{header: f.header, self: f.self}}
	index := map[string]int{}
	sizes := []int{len(in.Instances), 0} // 0: all, 1: no version, 2...: by version
	group := make([]int32, len(in.Instances))
	for k, inst := range in.Instances {
		i := 1
		if v := inst.Metadata[f.metaKey]; v != "" {
			var ok bool
			if i, ok = index[v]; !ok {
				i = len(sizes)
				index[v] = i
				sizes = append(sizes, 0)
			}
		}
		group[k] = int32(i)
		sizes[i]++
	}
	src, buf := in.Instances, in.Instances
	if inPlace {
		src = append([]Instance(nil), in.Instances...) // scratch, dropped after the build
	} else {
		buf = cacheline.Slice[Instance](len(in.Instances))
	}
	st.subsets = make([][]Instance, len(sizes))
	st.subsets[0] = in.Instances
	off := 0
	for i := 1; i < len(sizes); i++ {
		st.subsets[i] = buf[off : off : off+sizes[i]]
		off += sizes[i]
	}
	for k, inst := range src {
		st.subsets[group[k]] = append(st.subsets[group[k]], inst)
	}
	if sizes[1] > 0 {
		st.choice.fallback = 1
	}
	if len(index) > smallVersions {
		st.choice.index = index
	} else {
		st.choice.small = cacheline.Slice[versionIndex](len(index))[:0]
		for v, i := range index {
			st.choice.small = append(st.choice.small, versionIndex{v, i})
		}
	}
	return st
}

// smallVersions is how many versions a stage looks up by scanning a slice
// (a few string comparisons) rather than hashing into a map.
const smallVersions = 8

type versionIndex struct {
	version string
	i       int
}

// versionChoice is the per-request half of the version filter over one
// candidate list, whose subsets are: 0 every candidate, 1 those with no
// version, 2... one per version.
type versionChoice struct {
	fallback int            // 1 when some candidate has no version, else 0
	index    map[string]int // more than smallVersions versions
	small    []versionIndex // else
}

func (c *versionChoice) lookup(v string) (int, bool) {
	if c.index != nil {
		i, ok := c.index[v]
		return i, ok
	}
	for _, e := range c.small {
		if sameString(e.version, v) {
			return e.i, true
		}
	}
	return 0, false
}

// choose returns the subset for a request whose version is v ("" when it
// has none, then self: the caller's own version): that version's, else
// the unversioned, else every candidate.
func (c *versionChoice) choose(v, self string) int {
	if v == "" {
		v = self
	}
	if i, ok := c.lookup(v); ok { // "" is never a version of the index
		return i
	}
	return c.fallback
}

type versionStage struct {
	versionStageFields
	_ [cacheline.Size - unsafe.Sizeof(versionStageFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// versionStageFields are the fields of a versionStage, which pads them to whole cache
// lines.
type versionStageFields struct {
	header  string       // the request key
	self    string       // the caller's own version
	subsets [][]Instance // until the routing tree has read them
	choice  versionChoice
}

func (s *versionStage) Subsets() [][]Instance { return s.subsets }

// Choose reads the request's version key, else the lane a match rule gave
// the request.
func (s *versionStage) Choose(r Request) int {
	v := r.valueAs(s.header, routestate.RoleVersion)
	if v == "" {
		v = r.lane
	}
	return s.choice.choose(v, s.self)
}
