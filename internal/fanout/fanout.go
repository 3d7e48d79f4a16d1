// Package fanout keeps the watchers a change is fanned out to: the
// registry's, the cache's and the LoadBalancer's rule watchers all use one
// Set, and package adapter's Watchers offers it to the modules beside
// graylb's (the Nacos supplier, the Redis rule source), so adding,
// removing and delivering is written once.
package fanout

import "sync"

// Set is a set of watchers of type F (a func type). The zero value is
// empty and ready; a Set is safe for concurrent use. It never calls the
// watchers itself: the owner calls the ones Snapshot returns, in the order
// and under the locking its own contract promises.
//
// The watchers are one slice in the order they were added: a set of one
// watcher (a cache entry's LoadBalancer) costs one small allocation, and
// removal is a scan, for sets of a few.
type Set[F any] struct {
	mu   sync.Mutex
	next uint64
	fns  []entry[F]
}

type entry[F any] struct {
	id uint64
	fn F
}

// Add adds fn and returns a function that removes it; calling that more
// than once is harmless.
func (s *Set[F]) Add(fn F) (remove func()) {
	id := s.AddID(fn)
	return func() { s.Remove(id) }
}

// AddID adds fn and returns its id for Remove.
func (s *Set[F]) AddID(fn F) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	s.fns = append(s.fns, entry[F]{id, fn})
	return id
}

// Remove removes the watcher added with id and reports whether it was
// there (false once removed, or after Clear).
func (s *Set[F]) Remove(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.fns {
		if e.id == id {
			var zero entry[F]
			copy(s.fns[i:], s.fns[i+1:])
			s.fns[len(s.fns)-1] = zero // let the removed watcher go
			s.fns = s.fns[:len(s.fns)-1]
			if len(s.fns) == 0 {
				s.fns = nil
			}
			return true
		}
	}
	return false
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
	out := make([]F, len(s.fns))
	for i, e := range s.fns {
		out[i] = e.fn
	}
	return out
}

// Clear removes every watcher.
func (s *Set[F]) Clear() {
	s.mu.Lock()
	s.fns = nil
	s.mu.Unlock()
}
