package engine

// Filtering is split in two so that a pick costs O(1): Build runs once per
// instance-list (or rules) change and partitions the candidates into the
// subsets the filter can yield; the Stage's Choose runs per request and only
// names one of those subsets. The next filter in the chain is built over
// each subset in turn (treebuild.go).

// ServerFilter is graylb.ServerFilter.
type ServerFilter interface {
	Order() int
	Build(in BuildInfo) Stage
}

// BuildInfo is filter.BuildInfo.
type BuildInfo struct {
	Service   string
	Instances []Instance // the candidates that reach this filter; read-only
}

// Stage is filter.Stage.
type Stage interface {
	// Subsets returns the candidate lists the stage can choose from. It is
	// called once, right after Build.
	Subsets() [][]Instance
	// Choose returns the index of the subset for the request. It runs on
	// every pick: it must not block and should not allocate. An index out
	// of range means no instance.
	Choose(r Request) int
}

// KeyReader is filter.KeyReader.
type KeyReader interface {
	RequestKeys() []string
}

// PartitionFilter is filter.Partition.
func PartitionFilter(order int, requestKey string, key func(Instance) string) ServerFilter {
	return partitionFilter{order: order, requestKey: requestKey, key: key}
}

type partitionFilter struct {
	order      int
	requestKey string
	key        func(Instance) string
}

func (f partitionFilter) Order() int { return f.order }

// RequestKeys is the request key the filter reads.
func (f partitionFilter) RequestKeys() []string { return []string{f.requestKey} }

func (f partitionFilter) Build(in BuildInfo) Stage {
	st := &partitionStage{requestKey: f.requestKey, subsets: [][]Instance{in.Instances}, index: map[string]int{}}
	for _, inst := range in.Instances {
		k := f.key(inst)
		if k == "" {
			continue
		}
		i, ok := st.index[k]
		if !ok {
			i = len(st.subsets)
			st.index[k] = i
			st.subsets = append(st.subsets, nil)
		}
		st.subsets[i] = append(st.subsets[i], inst)
	}
	return st
}

type partitionStage struct {
	requestKey string
	subsets    [][]Instance // 0: every candidate
	index      map[string]int
}

func (s *partitionStage) Subsets() [][]Instance { return s.subsets }

func (s *partitionStage) Choose(r Request) int {
	if i, ok := s.index[r.Value(s.requestKey)]; ok {
		return i
	}
	return 0
}
