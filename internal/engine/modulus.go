package engine

import "math/bits"

// modulus computes x mod d for a fixed d > 0 and any 32-bit x with two
// multiplications instead of a division (a division costs several times
// more on the pick path): m = 2^64/d rounded up, and x mod d is the high
// word of (m·x mod 2^64)·d. This is exact for every 32-bit x and d.
type modulus uint64

// newModulus returns the modulus for d; d = 0 gives one whose results
// are meaningless (callers check for an empty list first).
func newModulus(d uint32) modulus {
	if d == 0 {
		return 0
	}
	return modulus(^uint64(0)/uint64(d) + 1)
}

// of returns x mod d, d being the value m was made for.
func (m modulus) of(x, d uint32) uint32 {
	hi, _ := bits.Mul64(uint64(m)*uint64(x), uint64(d))
	return uint32(hi)
}
