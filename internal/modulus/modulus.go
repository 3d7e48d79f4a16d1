// Package modulus reduces a 32-bit number modulo a fixed divisor without a
// division, for the engine's pick path (a division costs several times
// more than the two multiplications used instead).
//
// Contract: for every d > 0 and every 32-bit x, New(d).Of(x, d) == x % d.
// New(0) gives a Modulus whose results are meaningless; callers check for
// an empty list first. A Modulus is a plain value: safe to copy and to use
// from any number of goroutines.
package modulus

import "math/bits"

// Modulus computes x mod d for a fixed d > 0 and any 32-bit x with two
// multiplications: m = 2^64/d rounded up, and x mod d is the high word of
// (m·x mod 2^64)·d. This is exact for every 32-bit x and d.
type Modulus uint64

// New returns the Modulus for d; d = 0 gives one whose results are
// meaningless.
func New(d uint32) Modulus {
	if d == 0 {
		return 0
	}
	return Modulus(^uint64(0)/uint64(d) + 1)
}

// Of returns x mod d, d being the value m was made for.
func (m Modulus) Of(x, d uint32) uint32 {
	hi, _ := bits.Mul64(uint64(m)*uint64(x), uint64(d))
	return uint32(hi)
}
