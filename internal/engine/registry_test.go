package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
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
	// With pick counters installed: a failed pick of an unknown name is
	// counted, under one name.
	picks := newTestCounts()
	lb, _ := newTestLB(t, []Instance{inst("known", 1)}, WithObserver(picks.Observe))
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
	assert.Equal(t, uint64(warm+n), picks.Counts("<unrouted>")["prod"]["failed"], "every failed pick counted, under one name")
	reliabilityFragment(t, "hostile-07-names", fmt.Sprintf("| 7. distinct unknown service names picked (as a Transport's URL host from untrusted input): heap %+d bytes after %d names (was about +354 B a name) | TestLoadBalancer_UnknownNamesKeepMemoryBounded | %d names | — |\n", grown, n, n))
	_, err = lb.Pick(ctx, "known")
	assert.NoError(t, err)
}

// emptySource answers every name with an empty list, as a Nacos server does
// for a name nothing was ever registered under.
type emptySource struct{ watches atomic.Int64 }

func (s *emptySource) Instances(context.Context, string) ([]Instance, error) { return nil, nil }
func (s *emptySource) Watch(string, func([]Instance)) (func(), error) {
	s.watches.Add(1)
	return func() { s.watches.Add(-1) }, nil
}

// A source that answers unknown names with an empty list must not make the
// LoadBalancer and its Cache keep an entry (and a subscription) per name.
func TestLoadBalancer_EmptyUnknownNamesKeepNothing(t *testing.T) {
	src := &emptySource{}
	lb, err := New(src)
	require.NoError(t, err)
	defer lb.Close()
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := 0; i < 1000; i++ { // warm up
		_, err := lb.Pick(ctx, "warm-"+strconv.Itoa(i))
		require.ErrorIs(t, err, ErrNoInstance)
	}
	before := heap()
	n := 100_000
	for i := 0; i < n; i++ {
		_, err := lb.Pick(ctx, "unknown-"+strconv.Itoa(i))
		if !errors.Is(err, ErrNoInstance) {
			t.Fatalf("pick of an empty name: %v", err)
		}
	}
	grown := int64(heap()) - int64(before)
	t.Logf("%d names answered empty: heap %+d bytes, %d subscriptions left", n, grown, src.watches.Load())
	assert.Less(t, grown, int64(4<<20))
	assert.Zero(t, src.watches.Load(), "no subscription kept for a name with no instance")
	assert.Empty(t, lb.services.Load().all())
	// The same name again within the retry window fails fast, naming it.
	_, err = lb.Pick(ctx, "unknown-1")
	assert.ErrorIs(t, err, ErrNoInstance)
}

// A name with no instance reaches the Observer only under the one name
// "<unrouted>" (it could come from untrusted input; an Observer keeping
// per-service state would grow otherwise), each failure counted.
func TestLoadBalancer_UnknownNamesReachTheObserverUnderOneName(t *testing.T) {
	var mu sync.Mutex
	observed := map[string]int{}
	lb, err := New(&emptySource{}, WithObserver(func(service string, k Kind, o Outcome) {
		require.Equal(t, Failed, o)
		mu.Lock()
		observed[service]++
		mu.Unlock()
	}))
	require.NoError(t, err)
	defer lb.Close()
	for i := 0; i < 100; i++ {
		_, err := lb.Pick(context.Background(), "nobody-"+strconv.Itoa(i))
		require.ErrorIs(t, err, ErrNoInstance)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"<unrouted>": 100}, observed)
}
