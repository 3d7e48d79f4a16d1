package engine

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func weightedInstances(weights []float64) []Instance {
	list := make([]Instance, len(weights))
	for i, w := range weights {
		list[i] = inst("svc", i+1)
		list[i].Weight = w
	}
	return list
}

// TestWeighted_NextConcurrent: picks are in range and allocation-free from
// many goroutines, and the shares come out (rotor shards walk the
// schedule from their own offsets, so only roughly over a few cycles).
func TestWeighted_NextConcurrent(t *testing.T) {
	w := []float64{1, 1.5, 0.01, 7.25, 3}
	p := WeightedRoundRobin().NewPicker(weightedInstances(w))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { p.Next() }))
	const goroutines, each = 4, 200000
	var mu sync.Mutex
	counts := make([]int, len(w))
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]int, len(w))
			for range each {
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
	total := 0.0
	for _, x := range w {
		total += x
	}
	for i, x := range w {
		if x >= 1 {
			assert.InEpsilon(t, x/total, float64(counts[i])/goroutines/each, 0.05, "weight %v", x)
		}
	}
}
