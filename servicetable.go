package graylb

// fewServices is how many services a serviceTable finds by comparing
// names one by one: for a handful that is cheaper than hashing the name.
const fewServices = 8

// serviceTable is the immutable set of the services a LoadBalancer routes,
// swapped whole when one is added; Pick reads it without a lock.
type serviceTable struct {
	byName map[string]*service
	few    []*service // every service while there are at most fewServices, else nil
	_      [cacheLine - 32]byte
}

var emptyServiceTable = &serviceTable{byName: map[string]*service{}, few: []*service{}}

// get returns the service named name, nil when there is none.
func (t *serviceTable) get(name string) *service {
	if t.few == nil {
		return t.byName[name]
	}
	for _, s := range t.few {
		if sameString(s.name, name) {
			return s
		}
	}
	return nil
}

// with returns a copy of t that also holds s.
func (t *serviceTable) with(s *service) *serviceTable {
	out := &serviceTable{byName: make(map[string]*service, len(t.byName)+1)}
	for k, v := range t.byName {
		out.byName[k] = v
	}
	out.byName[s.name] = s
	if len(out.byName) <= fewServices {
		out.few = make([]*service, 0, fewServices) // one cache line
		for _, v := range out.byName {
			out.few = append(out.few, v)
		}
	}
	return out
}
