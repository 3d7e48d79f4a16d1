package adapter

import "github.com/graylb/graylb/internal/fanout"

// Watchers is the set of watchers a change is fanned out to, for a
// Supplier's or a RuleSource's Watch and the like outside graylb's module:
// F is the watchers' func type. The zero Watchers is empty and ready; it
// is safe for concurrent use.
//
// It never calls a watcher: its owner calls the ones Snapshot returns, in
// the order and under the locking its own contract promises, so a watcher
// may Add or remove watchers while it is called.
type Watchers[F any] struct{ s fanout.Set[F] }

// Add adds fn and returns a function that removes it; calling that more
// than once is harmless.
func (w *Watchers[F]) Add(fn F) (remove func()) { return w.s.Add(fn) }

// Snapshot returns the watchers in the order they were added, in a slice
// of the caller's (nil when there are none).
func (w *Watchers[F]) Snapshot() []F { return w.s.Snapshot() }

// Len returns the number of watchers.
func (w *Watchers[F]) Len() int { return w.s.Len() }
