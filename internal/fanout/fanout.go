// Package fanout keeps the watchers a change is fanned out to: the
// registry's, the cache's, the LoadBalancer's rule watchers and the Nacos
// supplier's subscriptions all use one Set, so adding, removing and
// delivering is written once.
package fanout

import (
	"sort"
	"sync"
)

// Set is a set of watchers of type F (a func type). The zero value is
// empty and ready; a Set is safe for concurrent use. It never calls the
// watchers itself: the owner calls the ones Snapshot returns, in the order
// and under the locking its own contract promises.
type Set[F any] struct {
	mu   sync.Mutex
	next uint64
	fns  map[uint64]F
}

// Add adds fn and returns a function that removes it; calling that more
// than once is harmless.
func (s *Set[F]) Add(fn F) (remove func()) {
	s.mu.Lock()
	id := s.next
	s.next++
	if s.fns == nil {
		s.fns = map[uint64]F{}
	}
	s.fns[id] = fn
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.fns, id)
			s.mu.Unlock()
		})
	}
}

// Len returns the number of watchers.
func (s *Set[F]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fns)
}

// Snapshot returns the watchers in the order they were added.
func (s *Set[F]) Snapshot() []F {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fns) == 0 {
		return nil
	}
	ids := make([]uint64, 0, len(s.fns))
	for id := range s.fns {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]F, len(ids))
	for i, id := range ids {
		out[i] = s.fns[id]
	}
	return out
}

// Clear removes every watcher.
func (s *Set[F]) Clear() {
	s.mu.Lock()
	s.fns = nil
	s.mu.Unlock()
}
