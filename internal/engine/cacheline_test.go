package engine

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillsLines reports whether the heap gives an object of size bytes a
// slot of its own aligned to a cache line (see cacheLine).
func fillsLines(size uintptr) bool { return size > 512 || size > 0 && size%cacheLine == 0 }

func TestHotObjectsFillCacheLines(t *testing.T) {
	for name, size := range map[string]uintptr{
		"serviceTable":     unsafe.Sizeof(serviceTable{}),
		"service":          unsafe.Sizeof(service{}),
		"tree":             unsafe.Sizeof(tree{}),
		"node":             unsafe.Sizeof(node{}),
		"nodeExt":          unsafe.Sizeof(nodeExt{}),
		"grayStage":        unsafe.Sizeof(grayStage{}),
		"compiledRules":    unsafe.Sizeof(compiledRules{}),
		"versionStage":     unsafe.Sizeof(versionStage{}),
		"roundRobin":       unsafe.Sizeof(roundRobin{}),
		"weighted":         unsafe.Sizeof(weighted{}),
		"rotor":            unsafe.Sizeof(rotor{}),
		"strictRoundRobin": unsafe.Sizeof(strictRoundRobin{}),
		"random":           unsafe.Sizeof(random{}),
		"p2c":              unsafe.Sizeof(p2c{}),
		"ServicePicker":    unsafe.Sizeof(ServicePicker{}),
	} {
		assert.True(t, fillsLines(size), "%s is %d bytes", name, size)
	}
	// What a pick reads of the LoadBalancer is apart from what is written
	// after New, even behind an allocation header of up to 8 bytes.
	var lb LoadBalancer
	hotEnd := unsafe.Offsetof(lb.gray) + unsafe.Sizeof(lb.gray)
	require.LessOrEqual(t, hotEnd, uintptr(2*cacheLine-8))
	for name, off := range map[string]uintptr{"cache": unsafe.Offsetof(lb.cache), "mu": unsafe.Offsetof(lb.mu), "closed": unsafe.Offsetof(lb.closed),
		"ruleLog": unsafe.Offsetof(lb.ruleLog), "ejectionLog": unsafe.Offsetof(lb.ejectionLog)} {
		require.GreaterOrEqual(t, off, uintptr(2*cacheLine), name)
	}
	for name, off := range map[string]uintptr{"services": unsafe.Offsetof(lb.services), "rules": unsafe.Offsetof(lb.rules),
		"handler": unsafe.Offsetof(lb.handler), "observer": unsafe.Offsetof(lb.observer)} {
		require.Less(t, off, hotEnd, name)
	}
	// What a pick reads of a service is apart from what rebuilds write.
	require.LessOrEqual(t, unsafe.Offsetof(service{}.unlisted), uintptr(cacheLine-1))
	require.GreaterOrEqual(t, unsafe.Offsetof(service{}.mu), uintptr(cacheLine))
}

func TestLineSlice(t *testing.T) {
	require.Nil(t, lineSlice[Instance](0))
	for n := 1; n < 40; n++ {
		for _, s := range []struct {
			size, cap uintptr
			len       int
		}{
			{unsafe.Sizeof(Instance{}), uintptr(cap(lineSlice[Instance](n))), len(lineSlice[Instance](n))},
			{unsafe.Sizeof(versionIndex{}), uintptr(cap(lineSlice[versionIndex](n))), len(lineSlice[versionIndex](n))},
			{8, uintptr(cap(lineSlice[*service](n))), len(lineSlice[*service](n))},
		} {
			require.Equal(t, n, s.len)
			require.True(t, fillsLines(s.size*s.cap), "%d elements of %d bytes in a cap of %d", n, s.size, s.cap)
		}
	}
}

// A rotor's mixer, read on every turn, shares its cache line with nothing
// that is written on a turn.
func TestRotorMixHasALineOfItsOwn(t *testing.T) {
	var r rotor
	mix, clash := unsafe.Offsetof(r.mix), unsafe.Offsetof(r.clash)
	assert.GreaterOrEqual(t, clash-mix, uintptr(cacheLine), "mix at %d, clash at %d", mix, clash)
	last := unsafe.Offsetof(r.shards) + unsafe.Sizeof(r.shards)
	assert.GreaterOrEqual(t, mix, last, "mix after the counters")
}
