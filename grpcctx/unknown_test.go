package grpcctx

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// emptySupplier answers every name with an empty list, as Nacos answers a
// name nothing was ever registered under, and counts subscriptions.
type emptySupplier struct {
	mu      sync.Mutex
	active  int // subscriptions not stopped
	watches int // subscriptions made
}

func (s *emptySupplier) Instances(context.Context, string) ([]graylb.Instance, error) {
	return nil, nil
}

func (s *emptySupplier) Watch(string, func([]graylb.Instance)) (func(), error) {
	s.mu.Lock()
	s.active++
	s.watches++
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.mu.Lock(); s.active--; s.mu.Unlock() }) }, nil
}

func (s *emptySupplier) counts() (active, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active, s.watches
}

// waitFor polls cond every millisecond until it holds or within passes;
// then it fails the test when fatal is set.
func waitFor(t *testing.T, within time.Duration, fatal bool, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			if fatal {
				t.Fatalf("%s: not within %v", what, within)
			}
			return
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Connections to graylb:///name-N for names that never had an instance,
// opened and closed one after another, leave nothing behind once closed:
// no subscription to the supplier, no per-name state (the heap returns to
// its baseline), as over HTTP.
func TestResolver_ClosedConnectionsToUnknownNamesLeaveNothing(t *testing.T) {
	n := 10000
	if raceEnabled {
		n = 2000 // the race detector makes each connection about ten times slower
	}
	sup := &emptySupplier{}
	lb, err := graylb.New(sup, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	opts := append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))
	open := func(i int) {
		conn, err := grpc.NewClient("graylb:///name-"+strconv.Itoa(i), opts...)
		require.NoError(t, err)
		conn.Connect() // builds the resolver
		waitFor(t, 5*time.Second, true, "the resolver of connection "+strconv.Itoa(i)+" subscribes", func() bool {
			_, w := sup.counts()
			return w > i
		})
		require.NoError(t, conn.Close())
	}
	for i := 0; i < 100; i++ { // grpc-go's own process-wide state, built once
		open(i)
	}
	waitFor(t, 2*time.Second, false, "the warm-up connections' subscriptions end", func() bool { a, _ := sup.counts(); return a == 0 })
	base := heapInUse()
	start := time.Now()
	for i := 100; i < 100+n; i++ {
		open(i)
	}
	took := time.Since(start)
	waitFor(t, 5*time.Second, false, "the subscriptions of closed connections end", func() bool { a, _ := sup.counts(); return a == 0 })
	grown := int64(heapInUse()) - int64(base)
	active, watches := sup.counts()
	t.Logf("%d connections to unknown names opened and closed in %v: %d subscriptions made, %d left, heap %+d B (%+.1f B a name)",
		n, took.Round(time.Millisecond), watches, active, grown, float64(grown)/float64(n))
	assert.Zero(t, active, "subscriptions left")
	// At most the bounded memory of names recently asked about (the
	// Cache's seed-failure ring, 4096 names) and allocator noise.
	assert.Less(t, grown, int64(1<<20), "heap growth after %d closed connections", n)
}
