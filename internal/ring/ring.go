// Package ring keeps the last few values of a stream: a bounded ring that
// drops its oldest value to take a new one once full, so that what the
// engine remembers of names from untrusted input (failed picks, failed
// first queries) stays bounded whatever the names.
//
// Contract: a Ring made by New(size) holds at most size values, newest
// first by At; Push is O(1) (amortised while the ring first fills: its
// memory grows with the values it holds, up to size), Remove O(size). A
// Ring does no locking: its owner guards it. The zero Ring holds nothing
// and takes nothing (Push hands back the value it is given).
//
// Exported identifiers are for the engine only.
package ring

// Ring is a bounded ring of values; see the package doc.
type Ring[T any] struct {
	buf  []T // grows up to size
	size int
	next int // where the next value goes: the oldest once full
	n    int // values held
}

// New returns an empty Ring of size values (none when size < 1). It
// allocates nothing until the first Push.
func New[T any](size int) Ring[T] {
	return Ring[T]{size: max(size, 0)}
}

// Len returns how many values r holds.
func (r *Ring[T]) Len() int { return r.n }

// Cap returns how many values r holds at most.
func (r *Ring[T]) Cap() int { return r.size }

// Push adds v as the newest value. When r was full, the oldest value is
// dropped and returned with true.
func (r *Ring[T]) Push(v T) (dropped T, full bool) {
	switch {
	case r.size == 0:
		return v, true
	case r.n == r.size:
		dropped, full = r.buf[r.next], true
		r.buf[r.next] = v
	case r.next == len(r.buf): // still filling for the first time
		r.buf = append(r.buf, v)
		r.n++
	default:
		r.buf[r.next] = v
		r.n++
	}
	if r.next++; r.next == r.size {
		r.next = 0
	}
	return dropped, full
}

// index returns the slot of the i-th newest value. Until buf has grown to
// size the values are buf[:n], oldest first, and next is n.
func (r *Ring[T]) index(i int) int {
	return (r.next - 1 - i + 2*len(r.buf)) % len(r.buf)
}

// At returns the i-th newest value (0 the newest); i must be below Len
// (At panics otherwise, as a slice index does).
func (r *Ring[T]) At(i int) T {
	if i < 0 || i >= r.n {
		panic("ring: index out of range")
	}
	return r.buf[r.index(i)]
}

// Remove drops the i-th newest value (0 the newest), keeping the order of
// the others; i must be below Len (Remove panics otherwise).
func (r *Ring[T]) Remove(i int) {
	if i < 0 || i >= r.n {
		panic("ring: index out of range")
	}
	// Move the newer values one slot older, over the removed one.
	for ; i > 0; i-- {
		r.buf[r.index(i)] = r.buf[r.index(i-1)]
	}
	r.next = (r.next - 1 + len(r.buf)) % len(r.buf)
	var zero T
	r.buf[r.next] = zero // nothing kept alive by a freed slot
	r.n--
}

// Newest appends the values to dst, newest first, and returns it.
func (r *Ring[T]) Newest(dst []T) []T {
	for i := 0; i < r.n; i++ {
		dst = append(dst, r.buf[r.index(i)])
	}
	return dst
}
