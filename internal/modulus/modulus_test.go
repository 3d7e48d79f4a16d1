package modulus

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestModulus_MatchesTheRemainder(t *testing.T) {
	divisors := []uint32{1, 2, 3, 7, 10, 100, 1000, 10000, 65535, 65536, 1<<31 - 1, 1 << 31, math.MaxUint32 - 1, math.MaxUint32}
	for i := 0; i < 200; i++ {
		divisors = append(divisors, rand.Uint32N(math.MaxUint32)+1)
	}
	for _, d := range divisors {
		m := New(d)
		xs := []uint32{0, 1, d - 1, d, d + 1, 2*d - 1, math.MaxUint32, math.MaxUint32 - 1}
		for i := 0; i < 2000; i++ {
			xs = append(xs, rand.Uint32())
		}
		for _, x := range xs {
			if got, want := m.Of(x, d), x%d; got != want {
				t.Fatalf("%d mod %d = %d, want %d", x, d, got, want)
			}
		}
	}
}

func FuzzModulus(f *testing.F) {
	f.Add(uint32(7), uint32(10))
	f.Add(uint32(math.MaxUint32), uint32(math.MaxUint32))
	f.Fuzz(func(t *testing.T, x, d uint32) {
		if d == 0 {
			return
		}
		if got, want := New(d).Of(x, d), x%d; got != want {
			t.Fatalf("%d mod %d = %d, want %d", x, d, got, want)
		}
	})
}
