// Package cacheline lays out the engine's hot objects on whole cache lines.
//
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
//
// Padding comes from types, never from counted bytes: a hot struct groups
// the fields a pick reads into a struct type of their own, H, and pads
// after it with
//
//	_ [cacheline.Size - unsafe.Sizeof(H{})%cacheline.Size]byte
//
// a constant expression (H is a concrete type) that rounds the struct up
// to the next whole cache line (a whole line more when H already fills
// lines exactly: the pad is never empty, as an empty last field would
// itself grow the struct). A field on a line of its own is a Uint64 or a
// Uint32. The engine's tests hold every hot type to FillsLines.
//
// Exported identifiers are for the engine only.
package cacheline

import (
	"sync/atomic"
	"unsafe"
)

// Size is the cache line size assumed: 64 bytes, the line of amd64 and
// of most arm64 cores.
const Size = 64

// FillsLines reports whether the heap gives an object of size bytes a slot
// of its own aligned to a cache line: more than 512 bytes, or a positive
// multiple of Size.
func FillsLines(size uintptr) bool { return size > 512 || size > 0 && size%Size == 0 }

// Slice makes a slice of n elements whose backing array fills whole cache
// lines (nil when n is 0): its capacity is the least c >= n such that c
// elements fill whole lines, or exceed 512 bytes.
func Slice[T any](n int) []T {
	if n == 0 {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	c := n
	for size > 0 && c*size <= 512 && c*size%Size != 0 {
		c++
	}
	return make([]T, n, c)
}

// Uint64 is an atomic.Uint64 with the rest of its cache line to itself:
// it starts a line when the struct holding it is laid out on lines.
type Uint64 struct {
	atomic.Uint64
	_ [Size - unsafe.Sizeof(atomic.Uint64{})]byte
}

// Uint32 is an atomic.Uint32 with the rest of its cache line to itself.
type Uint32 struct {
	atomic.Uint32
	_ [Size - unsafe.Sizeof(atomic.Uint32{})]byte
}
