package graylb

import "unsafe"

// A pick reads shared objects on every call and writes none of them (the
// round-robin counters aside, each padded onto cache lines of its own). A
// read-only object that shares a cache line with another object some
// goroutine keeps writing is slowed down all the same, on every core: two
// goroutines picking at once ran at one core's speed whenever the
// allocator happened to put the service table beside a benchmark's
// per-goroutine counter. So the objects a pick reads fill whole cache
// lines: the heap places an object of 64·k bytes (up to 512), or of more
// than 512, at a cache-line boundary in a slot of its own.
// TestHotObjectsFillCacheLines holds the types to it.
const cacheLine = 64

// lineSlice makes a slice of n elements whose backing array fills whole
// cache lines (nil when n is 0).
func lineSlice[T any](n int) []T {
	if n == 0 {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	c := n
	for size > 0 && c*size <= 512 && c*size%cacheLine != 0 {
		c++
	}
	return make([]T, n, c)
}
