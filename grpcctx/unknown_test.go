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
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(within); !cond(); {
		select {
		case <-tick.C:
		case <-deadline:
			if fatal {
				t.Fatalf("%s: not within %v", what, within)
			}
			return
		}
	}
}

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Connections to graylb:///name-N for names that never had an instance,
// opened and closed one after another, leave nothing behind once closed:
// no subscription to the supplier, and no per-name state: past the
// Cache's bounded memory of names recently asked about (4096 names, see
// graylb.WithSeedRetry) the heap stops growing.
func TestResolver_ClosedConnectionsToUnknownNamesLeaveNothing(t *testing.T) {
	const n = 10000 // two halves, each beyond the 4096 names remembered
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
	ended := func() bool { a, _ := sup.counts(); return a == 0 }
	for i := 0; i < 100; i++ { // grpc-go's own process-wide state, built once
		open(i)
	}
	waitFor(t, 2*time.Second, false, "the warm-up connections' subscriptions end", ended)
	base := heapInUse()
	start := time.Now()
	for i := 100; i < 100+n/2; i++ {
		open(i)
	}
	waitFor(t, 5*time.Second, false, "the subscriptions of closed connections end", ended)
	mid := heapInUse()
	for i := 100 + n/2; i < 100+n; i++ {
		open(i)
	}
	took := time.Since(start)
	waitFor(t, 5*time.Second, false, "the subscriptions of closed connections end", ended)
	end := heapInUse()
	active, watches := sup.counts()
	first, second := int64(mid)-int64(base), int64(end)-int64(mid)
	t.Logf("%d connections to unknown names opened and closed in %v: %d subscriptions made, %d left; heap %+d B over the first %d, %+d B (%+.1f B a name) over the next %d",
		n, took.Round(time.Millisecond), watches, active, first, n/2, second, float64(second)/float64(n/2), n/2)
	assert.Zero(t, active, "subscriptions left")
	assert.Less(t, first, int64(2<<20), "heap growth over the first %d names (at most the 4096 names remembered)", n/2)
	assert.Less(t, second, int64(256<<10), "heap growth over the next %d names (nothing per name)", n/2)
}
