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
	// What a pick reads of the LoadBalancer is a type of its own, first;
	// every field written after New starts past the cache line it ends on,
	// even behind an allocation header of up to 8 bytes.
	var lb LoadBalancer
	hot := unsafe.Sizeof(balancerHot{})
	cold := (hot + cacheline.Size - 1) / cacheline.Size * cacheline.Size // its lines
	require.Zero(t, unsafe.Offsetof(lb.balancerHot))
	require.LessOrEqual(t, hot, cold-8, "what a pick reads, behind a header, spills onto the next line")
	require.Equal(t, cold, unsafe.Offsetof(lb.cache), "the first field written after New starts the line after what a pick reads")
	for name, off := range map[string]uintptr{"cache": unsafe.Offsetof(lb.cache), "mu": unsafe.Offsetof(lb.mu), "closed": unsafe.Offsetof(lb.closed),
		"ruleLog": unsafe.Offsetof(lb.ruleLog), "ejectionLog": unsafe.Offsetof(lb.ejectionLog), "unrouted": unsafe.Offsetof(lb.unrouted)} {
		require.GreaterOrEqual(t, off, cold, name)
	}
	for name, off := range map[string]uintptr{"services": unsafe.Offsetof(lb.services), "rules": unsafe.Offsetof(lb.rules),
		"handler": unsafe.Offsetof(lb.handler), "observer": unsafe.Offsetof(lb.observer), "gray": unsafe.Offsetof(lb.gray)} {
		require.Less(t, off, hot, name)
	}
	// What a pick reads of a service is a type of its own, on a cache line
	// of its own; what rebuilds write is another, on the lines after it.
	var s service
	require.Zero(t, unsafe.Offsetof(s.serviceHot))
	require.LessOrEqual(t, unsafe.Sizeof(serviceHot{}), uintptr(cacheline.Size))
	require.Equal(t, uintptr(cacheline.Size), unsafe.Offsetof(s.serviceCold))
	require.GreaterOrEqual(t, unsafe.Offsetof(s.mu), uintptr(cacheline.Size))
}
