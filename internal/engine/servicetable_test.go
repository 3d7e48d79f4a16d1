package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every service added is found, in the table with returned and in every
// later one, inline and in buckets through each doubling, while readers
// read without a lock (run with -race).
func TestServiceTable_AddAndFind(t *testing.T) {
	var cur atomic.Pointer[serviceTable]
	cur.Store(emptyServiceTable)
	var mu sync.Mutex // lb.mu
	const n = 5000
	svcs := make([]*service, n)
	for i := range svcs {
		svcs[i] = &service{}
		svcs[i].name = fmt.Sprintf("svc-%d", i)
	}
	var added atomic.Int64 // services published so far
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := int(added.Load())
				if k == 0 {
					continue
				}
				s := svcs[k-1]
				if got := cur.Load().get(s.name); got != nil && got != s {
					t.Errorf("%s: found another service", s.name)
					return
				}
			}
		}()
	}
	for i, s := range svcs {
		mu.Lock()
		require.Nil(t, cur.Load().get(s.name))
		next := cur.Load().with(s)
		cur.Store(next)
		mu.Unlock()
		added.Store(int64(i + 1))
		require.Same(t, s, next.get(s.name))
		if i%997 == 0 || i < 2*fewServices {
			for _, old := range svcs[:i+1] {
				require.Same(t, old, next.get(old.name), "after %d", i+1)
			}
		}
	}
	close(stop)
	wg.Wait()
	require.Len(t, cur.Load().all(), n)
	require.Nil(t, cur.Load().get("svc-unknown"))
	require.Nil(t, cur.Load().get(""))
}
