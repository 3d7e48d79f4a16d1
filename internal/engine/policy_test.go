package engine

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb/internal/rotor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStrictRoundRobin_Cycles(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2), inst("svc", 3)}
	p := StrictRoundRobin().NewPicker(list)
	first := p.Next()
	for i := 1; i < 30; i++ {
		assert.Equal(t, (first+i)%3, p.Next())
	}
}

func TestRoundRobin_EvenShares(t *testing.T) {
	list := make([]Instance, 7)
	p := RoundRobin().NewPicker(list)
	counts := make([]int, len(list))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]int, len(list))
			for i := 0; i < 7000; i++ {
				local[p.Next()]++
			}
			mu.Lock()
			for i, c := range local {
				counts[i] += c
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, c := range counts {
		// Each core rotates strictly; shards switch only when a goroutine
		// moves or the pool is emptied, so shares stay within a few turns.
		assert.InDelta(t, 4000, c, 400, "instance %d", i)
	}
}

func TestRandom_Covers(t *testing.T) {
	p := Random().NewPicker(make([]Instance, 5))
	seen := map[int]int{}
	for i := 0; i < 5000; i++ {
		seen[p.Next()]++
	}
	for i := 0; i < 5; i++ {
		assert.InDelta(t, 1000, seen[i], 200)
	}
}

func TestWeightedRoundRobin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []float64
	}{
		{"integers", []float64{1, 2, 3}},
		{"fractional below one", []float64{0.1, 0.3, 0.6}},
		{"zero gets nothing", []float64{0, 1, 1}},
		{"wide spread", []float64{0.001, 1000, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := make([]Instance, len(tc.weights))
			total := 0.0
			for i, w := range tc.weights {
				list[i] = inst("svc", i+1)
				list[i].Weight = w
				total += w
			}
			p := WeightedRoundRobin().NewPicker(list)
			cycle := p.(*weighted).s.Len()
			counts := make([]int, len(list))
			// Each core walks the schedule on its own counter (and -race
			// makes sync.Pool switch counters at random), so shares are
			// exact only over many turns.
			n := max(cycle*3, 6000)
			for i := 0; i < n; i++ {
				counts[p.Next()]++
			}
			for i, w := range tc.weights {
				if w == 0 {
					assert.Zero(t, counts[i], "weight 0 never picked")
					continue
				}
				assert.Positive(t, counts[i], "a positive weight is picked")
				share := float64(counts[i]) / float64(n)
				assert.InDelta(t, w/total, share, math.Max(0.02, 2.0/float64(cycle)), "share of %v", w)
			}
		})
	}
}

// A round-robin picker keeps one counter word while its picks do not
// contend: no rotor, and one global rotation.
func TestRoundRobin_OneCounterUncontended(t *testing.T) {
	p := RoundRobin().NewPicker(make([]Instance, 7)).(*roundRobin)
	prev := p.Next()
	for i := 0; i < 100_000; i++ {
		next := p.Next()
		require.Equal(t, (prev+1)%7, next, "pick %d", i)
		prev = next
	}
	assert.False(t, p.t.Sharded(), "a picker nobody contends for took a rotor")
}

// Picks on two cores at once make the picker take its sharded counters,
// after which no pick writes the single counter word (the line the
// picker's read-only fields are on).
func TestRoundRobin_ShardsOnceContended(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two Ps for picks to contend")
	}
	p := RoundRobin().NewPicker(make([]Instance, 7)).(*roundRobin)
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !p.t.Sharded() && time.Now().Before(deadline) {
				for i := 0; i < 1000; i++ {
					if n := p.Next(); n < 0 || n >= 7 {
						bad.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.True(t, p.t.Sharded(), "two goroutines picking for 30 s never made the picker shard")
	require.Zero(t, bad.Load(), "an index out of range")
	// (A pick that lost a swap just before the switch may still have
	// counted once past the mark: any value from it up is the mark.)
	marked := p.t.Word()
	require.GreaterOrEqual(t, marked, uint64(rotor.ShardedMark))
	counts := make([]int, 7)
	for i := 0; i < 7000; i++ {
		counts[p.Next()]++
	}
	require.Equal(t, marked, p.t.Word(), "a sharded picker wrote its counter word")
	for i, c := range counts {
		assert.InDelta(t, 1000, c, 1, "instance %d: one goroutine rotates strictly on its shard", i)
	}
}
