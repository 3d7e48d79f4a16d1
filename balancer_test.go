package graylb

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rules change that lands while a service is being added (after its
// first routing was built, before it is published) must reach that
// service: prod never reaches an instance the newest rules mark gray.
func TestSetRules_ReachesServiceBeingAdded(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2)}
	lb, _ := newTestLB(t, list)
	lb.testHookServiceBuilt = func() {
		require.NoError(t, lb.SetRules(Rules{GrayAddresses: []string{"127.0.0.1:2"}}))
	}
	prod := withHeaders(context.Background(), "gray", "false")
	for i := 0; i < 100; i++ {
		in, err := lb.Pick(prod, "svc")
		require.NoError(t, err)
		require.Equal(t, 1, in.Port, "pick %d: prod reached 127.0.0.1:2, gray by the newest rules", i)
	}
}

// The same race without a hook, as it happens: a rules change lands at a
// random moment while a large service is added. Whatever the timing, the
// service then routes by the newest rules.
func TestSetRules_RaceWithFirstUse(t *testing.T) {
	reg := NewRegistry()
	const n = 3000
	for p := 1; p <= n; p++ {
		require.NoError(t, reg.Register(inst("svc", p)))
	}
	prod := withHeaders(context.Background(), "gray", "false")
	final := Rules{GrayAddresses: []string{"127.0.0.1:1"}}
	for round := 0; round < 30; round++ {
		lb, err := New(reg, WithContextHandler(testHandler), WithPolicy(StrictRoundRobin()))
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := lb.Pick(prod, "svc")
			assert.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			spin(time.Duration(rand.IntN(4000)) * time.Microsecond)
			assert.NoError(t, lb.SetRules(final))
		}()
		wg.Wait()
		for i := 0; i < n; i++ {
			in, err := lb.Pick(prod, "svc")
			require.NoError(t, err)
			require.NotEqual(t, 1, in.Port, "round %d: prod reached 127.0.0.1:1, gray by the newest rules", round)
		}
		lb.Close()
	}
}

// spin waits d without sleeping (a sleep is far coarser than d).
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
