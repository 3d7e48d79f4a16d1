package engine

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
)

// fewServices is how many services a serviceTable keeps inline and finds
// by comparing names: for a handful that is cheaper than hashing the name,
// and a pick follows one pointer less.
const fewServices = 6

// serviceTable is the set of the services a LoadBalancer routes. Readers
// (Pick) find a service without a lock: inline while there are a few,
// then in a hash table whose buckets are immutable slices swapped one at a
// time. Adding the n-th service copies one bucket (a few entries), and the
// table doubles when it holds as many services as buckets, copying every
// entry once: O(1) amortised, where copying a whole map per service made
// learning N services O(N²). A reader holding a table from before a
// doubling may miss a service added since; it finds it through the
// LoadBalancer's slow path (addService), which looks again under lb.mu.
// Writers hold lb.mu.
type serviceTable struct {
	serviceTableFields
	_ [cacheline.Size - unsafe.Sizeof(serviceTableFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// serviceTableFields are the fields of a serviceTable, which pads them to whole cache
// lines.
type serviceTableFields struct {
	nFew    int                       // entries of few in use; -1 when the buckets hold the services
	few     [fewServices]serviceEntry // while there are at most fewServices
	buckets []atomic.Pointer[[]serviceEntry]
	mask    uint64
	seed    maphash.Seed
	n       *int // services in the buckets, shared by the tables a doubling makes (guarded by lb.mu)
}

type serviceEntry struct {
	name string
	s    *service
}

var emptyServiceTable = &serviceTable{}

// get returns the service named name, nil when there is none.
func (t *serviceTable) get(name string) *service {
	if t.nFew >= 0 {
		for i := 0; i < t.nFew; i++ {
			if sameString(t.few[i].name, name) {
				return t.few[i].s
			}
		}
		return nil
	}
	if b := t.buckets[maphash.String(t.seed, name)&t.mask].Load(); b != nil {
		for _, e := range *b {
			if sameString(e.name, name) {
				return e.s
			}
		}
	}
	return nil
}

// with adds s (whose name t does not hold) and returns the table to
// publish: t itself, or a new table when it was inline and full or its
// buckets had to double. lb.mu is held.
func (t *serviceTable) with(s *service) *serviceTable {
	if t.nFew >= 0 && t.nFew < fewServices {
		out := &serviceTable{serviceTableFields: serviceTableFields{nFew: t.nFew + 1, few: t.few}}
		out.few[t.nFew] = serviceEntry{s.name, s}
		return out
	}
	if t.nFew >= 0 || *t.n >= len(t.buckets) {
		t = t.grown()
	}
	t.insert(serviceEntry{s.name, s})
	*t.n++
	return t
}

// grown returns a table of twice as many buckets (16 at least) holding
// t's services.
func (t *serviceTable) grown() *serviceTable {
	size := max(16, 2*len(t.buckets))
	out := &serviceTable{serviceTableFields: serviceTableFields{nFew: -1, buckets: make([]atomic.Pointer[[]serviceEntry], size),
		mask: uint64(size - 1), seed: maphash.MakeSeed(), n: new(int)}}
	t.each(func(e serviceEntry) {
		out.insert(e)
		*out.n++
	})
	return out
}

// insert puts e in its bucket: a copy of the bucket with e, swapped in.
func (t *serviceTable) insert(e serviceEntry) {
	p := &t.buckets[maphash.String(t.seed, e.name)&t.mask]
	var b []serviceEntry
	if old := p.Load(); old != nil {
		b = make([]serviceEntry, len(*old), len(*old)+1)
		copy(b, *old)
	}
	b = append(b, e)
	p.Store(&b)
}

// each calls f with every service of t.
func (t *serviceTable) each(f func(serviceEntry)) {
	if t.nFew >= 0 {
		for _, e := range t.few[:t.nFew] {
			f(e)
		}
		return
	}
	for i := range t.buckets {
		if b := t.buckets[i].Load(); b != nil {
			for _, e := range *b {
				f(e)
			}
		}
	}
}

// all returns every service of t.
func (t *serviceTable) all() []*service {
	var out []*service
	t.each(func(e serviceEntry) { out = append(out, e.s) })
	return out
}
