package graylb

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Names can come from untrusted input (a Transport's URL host): picking
// distinct unknown names must not grow the heap.
func TestLoadBalancer_UnknownNamesKeepMemoryBounded(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000 // the detector makes each pick ~10x slower; the growth per name is the same
	}
	lb, _ := newTestLB(t, []Instance{inst("known", 1)})
	ctx := context.Background()
	_, err := lb.Pick(ctx, "known")
	require.NoError(t, err)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	warm := 10_000
	for i := 0; i < warm; i++ {
		_, err := lb.Pick(ctx, "unknown-"+strconv.Itoa(i))
		require.ErrorIs(t, err, ErrUnknownService)
	}
	before := heap()
	for i := warm; i < warm+n; i++ {
		_, err := lb.Pick(ctx, "unknown-"+strconv.Itoa(i))
		if err == nil {
			t.Fatal("an unknown name was picked")
		}
	}
	after := heap()
	grown := int64(after) - int64(before)
	t.Logf("%d distinct unknown names: heap %+d bytes", n, grown)
	assert.Less(t, grown, int64(4<<20), "heap grew by %d bytes over %d unknown names", grown, n)
	reliabilityFragment(t, "hostile-07-names", fmt.Sprintf("| 7. distinct unknown service names picked (as a Transport's URL host from untrusted input): heap %+d bytes after %d names (was about +354 B a name) | TestLoadBalancer_UnknownNamesKeepMemoryBounded | %d names | — |\n", grown, n, n))
	_, err = lb.Pick(ctx, "known")
	assert.NoError(t, err)
}
