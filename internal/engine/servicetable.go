package engine

import (
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
)

// fewServices is how many services a serviceTable keeps inline and finds
// by comparing names: for a handful that is cheaper than hashing the name,
// and a pick follows one pointer less.
const fewServices = 6

// serviceTable is the immutable set of the services a LoadBalancer routes,
// swapped whole when one is added; Pick reads it without a lock.
type serviceTable struct {
	serviceTableFields
	_ [cacheline.Size - unsafe.Sizeof(serviceTableFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// serviceTableFields are the fields of a serviceTable, which pads them to whole cache
// lines.
type serviceTableFields struct {
	byName map[string]*service
	nFew   int                       // entries of few in use; -1 when there are more than fewServices
	few    [fewServices]serviceEntry // while there are at most fewServices
}

type serviceEntry struct {
	name string
	s    *service
}

var emptyServiceTable = &serviceTable{serviceTableFields: serviceTableFields{byName: map[string]*service{}}}

// get returns the service named name, nil when there is none.
func (t *serviceTable) get(name string) *service {
	if t.nFew < 0 {
		return t.byName[name]
	}
	for i := 0; i < t.nFew; i++ {
		if sameString(t.few[i].name, name) {
			return t.few[i].s
		}
	}
	return nil
}

// with returns a copy of t that also holds s.
func (t *serviceTable) with(s *service) *serviceTable {
	out := &serviceTable{serviceTableFields: serviceTableFields{byName: make(map[string]*service, len(t.byName)+1)}}
	for k, v := range t.byName {
		out.byName[k] = v
	}
	out.byName[s.name] = s
	if len(out.byName) > fewServices {
		out.nFew = -1
		return out
	}
	for name, v := range out.byName {
		out.few[out.nFew] = serviceEntry{name, v}
		out.nFew++
	}
	return out
}
