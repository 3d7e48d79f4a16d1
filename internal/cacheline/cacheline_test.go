package cacheline

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestFillsLines(t *testing.T) {
	for size, want := range map[uintptr]bool{0: false, 1: false, 32: false, 64: true, 96: false, 128: true, 512: true, 513: true, 520: true} {
		require.Equal(t, want, FillsLines(size), "%d bytes", size)
	}
}

func TestSlice(t *testing.T) {
	type (
		b24 [3]uint64
		b40 [5]uint64
		b80 [10]uint64
	)
	require.Nil(t, Slice[b80](0))
	for n := 1; n < 40; n++ {
		for _, s := range []struct {
			size      uintptr
			len, cap_ int
		}{
			{unsafe.Sizeof(b80{}), len(Slice[b80](n)), cap(Slice[b80](n))},
			{unsafe.Sizeof(b40{}), len(Slice[b40](n)), cap(Slice[b40](n))},
			{unsafe.Sizeof(b24{}), len(Slice[b24](n)), cap(Slice[b24](n))},
			{8, len(Slice[*int](n)), cap(Slice[*int](n))},
		} {
			require.Equal(t, n, s.len)
			require.True(t, FillsLines(s.size*uintptr(s.cap_)), "%d elements of %d bytes in a cap of %d", n, s.size, s.cap_)
		}
	}
}

// The padded atomics are one line each, the value at the line's start.
func TestPaddedAtomics(t *testing.T) {
	require.Equal(t, uintptr(Size), unsafe.Sizeof(Uint64{}))
	require.Equal(t, uintptr(Size), unsafe.Sizeof(Uint32{}))
	var u Uint64
	u.Store(7)
	require.Equal(t, uint64(7), u.Add(1)-1)
}
