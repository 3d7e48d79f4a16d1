package adapter_test

import (
	"sync"
	"testing"

	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Watchers keeps its watchers in the order they were added, hands each
// caller a slice of its own, and a remove called twice removes once.
func TestWatchers(t *testing.T) {
	var w adapter.Watchers[func(int) int]
	assert.Zero(t, w.Len())
	assert.Nil(t, w.Snapshot(), "the zero Watchers")
	r1 := w.Add(func(v int) int { return 10 + v })
	w.Add(func(v int) int { return 20 + v })
	r3 := w.Add(func(v int) int { return 30 + v })
	var got []int
	for _, fn := range w.Snapshot() {
		got = append(got, fn(1))
	}
	assert.Equal(t, []int{11, 21, 31}, got, "in the order added")

	snap := w.Snapshot()
	snap[0] = nil
	require.NotNil(t, w.Snapshot()[0], "a Snapshot is the caller's")

	r1()
	r1() // twice is harmless
	assert.Equal(t, 2, w.Len())
	got = got[:0]
	for _, fn := range w.Snapshot() {
		got = append(got, fn(2))
	}
	assert.Equal(t, []int{22, 32}, got, "the others keep their order")
	r3()
	assert.Equal(t, 1, w.Len())
}

// A watcher called from a Snapshot may add and remove watchers: the
// Watchers holds no lock while its owner calls them.
func TestWatchers_ChangedWhileCalled(t *testing.T) {
	var w adapter.Watchers[func()]
	var remove func()
	remove = w.Add(func() {
		remove()
		w.Add(func() {})
	})
	for _, fn := range w.Snapshot() {
		fn()
	}
	assert.Equal(t, 1, w.Len())
}

func TestWatchers_Concurrent(t *testing.T) {
	var w adapter.Watchers[func()]
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				remove := w.Add(func() {})
				_ = w.Snapshot()
				remove()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, w.Len())
}
