package graylb

// VersionFilter routes by version (seed 004): a request's version (header
// "version", else the caller's own version) selects the instances whose
// "version" metadata equals it; if there are none, the instances with no
// version; if there are none, every candidate. A request with no version
// goes to the instances with no version, else to every candidate. It runs
// after the GrayFilter and narrows what the gray decision left.
type VersionFilter struct {
	header  string
	metaKey string
	self    string
	order   int
}

// VersionOption configures a VersionFilter.
type VersionOption func(*VersionFilter)

// WithVersionHeader sets the request header (default "version").
func WithVersionHeader(name string) VersionOption {
	return func(f *VersionFilter) {
		if name != "" {
			f.header = name
		}
	}
}

// WithVersionKey sets the instance metadata key (default "version").
func WithVersionKey(key string) VersionOption {
	return func(f *VersionFilter) {
		if key != "" {
			f.metaKey = key
		}
	}
}

// WithSelfVersion sets the caller's own version, used when the request
// carries none.
func WithSelfVersion(v string) VersionOption { return func(f *VersionFilter) { f.self = v } }

// WithVersionOrder sets the filter's order (default 100).
func WithVersionOrder(order int) VersionOption { return func(f *VersionFilter) { f.order = order } }

// NewVersionFilter returns a VersionFilter.
func NewVersionFilter(opts ...VersionOption) *VersionFilter {
	f := &VersionFilter{header: DefaultVersionKey, metaKey: DefaultVersionKey, order: 100}
	for _, o := range opts {
		if o != nil {
			o(f)
		}
	}
	return f
}

// Header is the request header the filter reads.
func (f *VersionFilter) Header() string { return f.header }

// Order returns the filter's order.
func (f *VersionFilter) Order() int { return f.order }

// Build groups the candidates by version.
func (f *VersionFilter) Build(in BuildInfo) Stage {
	st := &versionStage{f: f, index: map[string]int{}}
	st.subsets = [][]Instance{in.Instances, nil} // 0: all, 1: no version
	for _, inst := range in.Instances {
		v := inst.Metadata[f.metaKey]
		if v == "" {
			st.subsets[1] = append(st.subsets[1], inst)
			continue
		}
		i, ok := st.index[v]
		if !ok {
			i = len(st.subsets)
			st.index[v] = i
			st.subsets = append(st.subsets, nil)
		}
		st.subsets[i] = append(st.subsets[i], inst)
	}
	return st
}

type versionStage struct {
	f       *VersionFilter
	subsets [][]Instance
	index   map[string]int
}

func (s *versionStage) Subsets() [][]Instance { return s.subsets }

func (s *versionStage) Choose(r Request) int {
	v := r.Value(s.f.header)
	if v == "" {
		v = s.f.self
	}
	if v != "" {
		if i, ok := s.index[v]; ok {
			return i
		}
	}
	if len(s.subsets[1]) > 0 {
		return 1
	}
	return 0
}
