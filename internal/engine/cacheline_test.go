package engine

import (
	"testing"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
		"strictRoundRobin": unsafe.Sizeof(strictRoundRobin{}),
		"random":           unsafe.Sizeof(random{}),
		"p2c":              unsafe.Sizeof(p2c{}),
		"ServicePicker":    unsafe.Sizeof(ServicePicker{}),
	} {
		assert.True(t, cacheline.FillsLines(size), "%s is %d bytes", name, size)
	}
	// What a pick reads of the LoadBalancer is apart from what is written
	// after New, even behind an allocation header of up to 8 bytes.
	var lb LoadBalancer
	hotEnd := unsafe.Offsetof(lb.gray) + unsafe.Sizeof(lb.gray)
	require.LessOrEqual(t, hotEnd, uintptr(2*cacheline.Size-8))
	for name, off := range map[string]uintptr{"cache": unsafe.Offsetof(lb.cache), "mu": unsafe.Offsetof(lb.mu), "closed": unsafe.Offsetof(lb.closed),
		"ruleLog": unsafe.Offsetof(lb.ruleLog), "ejectionLog": unsafe.Offsetof(lb.ejectionLog)} {
		require.GreaterOrEqual(t, off, uintptr(2*cacheline.Size), name)
	}
	for name, off := range map[string]uintptr{"services": unsafe.Offsetof(lb.services), "rules": unsafe.Offsetof(lb.rules),
		"handler": unsafe.Offsetof(lb.handler), "observer": unsafe.Offsetof(lb.observer)} {
		require.Less(t, off, hotEnd, name)
	}
	// What a pick reads of a service is apart from what rebuilds write.
	require.LessOrEqual(t, unsafe.Offsetof(service{}.unlisted), uintptr(cacheline.Size-1))
	require.GreaterOrEqual(t, unsafe.Offsetof(service{}.mu), uintptr(cacheline.Size))
}
