package engine

import "unsafe"

// A pick reads shared objects on every call and writes none of them (the
// round-robin counters aside, each padded onto cache lines of its own). A
// read-only object that shares a cache line with another object some
// goroutine keeps writing is slowed down all the same, on every core
// (false sharing): a 32-byte service table read by every pick, placed by
// the allocator beside another goroutine's 32-byte counter, made two
// cores pick at one core's speed. So the objects a pick reads fill whole
// cache lines: the heap gives an object of 64·k bytes (up to 512) a slot
// of its own at a cache-line boundary, and an object of more than 512
// bytes a slot of its own of whole cache lines (at its start, or 8 bytes
// in, behind the allocator's header, when it holds pointers).
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
