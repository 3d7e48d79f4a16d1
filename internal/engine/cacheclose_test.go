package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingStops is a stalledSupplier whose Watch counts the calls of the
// stops it hands out.
type countingStops struct {
	*stalledSupplier
	stops atomic.Int32
}

func (s *countingStops) Watch(string, func([]Instance)) (func(), error) {
	return func() { s.stops.Add(1) }, nil
}

// Cache.Close returns at once while a first query hangs on the source,
// and the callers waiting on it get ErrClosed; the subscription the seed
// took is stopped once, when the query ends.
func TestCache_CloseReturnsWhileSeedBlocks(t *testing.T) {
	sup := &countingStops{stalledSupplier: newStalledSupplier(t, func(string) bool { return true }, inst("a", 1))}
	c, err := NewCache(sup)
	require.NoError(t, err)
	first := make(chan error, 1)
	go func() { _, err := c.Instances(context.Background(), "a"); first <- err }()
	sup.waitEntered(t, "a")
	second := make(chan error, 1)
	go func() { _, err := c.Instances(context.Background(), "a"); second <- err }()

	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Second):
		sup.unblock() // let the old code end
		t.Fatal("Cache.Close still blocked after 1 s on a seed in flight")
	}
	select {
	case err := <-second:
		require.ErrorIs(t, err, ErrClosed, "a caller waiting on the seed")
	case <-time.After(time.Second):
		t.Fatal("a caller waiting on the seed still blocked after Close")
	}
	sup.unblock()
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("the seeding caller never returned")
	}
	assert.EqualValues(t, 1, sup.stops.Load(), "the seed's subscription is stopped exactly once")
}

// A seed that ends after Close began stops its subscription exactly once,
// whichever of the two gets to it first. (Close used to wait for the seed
// and stop the subscription the seed had already stopped.)
func TestCache_SeedSubscriptionStoppedOnceWhenClosed(t *testing.T) {
	sup := &countingStops{stalledSupplier: newStalledSupplier(t, func(string) bool { return true }, inst("a", 1))}
	c, err := NewCache(sup)
	require.NoError(t, err)
	first := make(chan error, 1)
	go func() { _, err := c.Instances(context.Background(), "a"); first <- err }()
	sup.waitEntered(t, "a")
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closed
	}, 5*time.Second, time.Millisecond, "Close began")
	sup.unblock()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close never returned")
	}
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("the seeding caller never returned")
	}
	assert.EqualValues(t, 1, sup.stops.Load(), "stops of the seed's subscription")
}
