package rotor

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rotor fills whole cache lines, and so do its counters.
func TestRotor_FillsCacheLines(t *testing.T) {
	assert.True(t, cacheline.FillsLines(unsafe.Sizeof(rotor{})), "rotor is %d bytes", unsafe.Sizeof(rotor{}))
	assert.Zero(t, unsafe.Sizeof(counter{})%cacheline.Size, "counter is %d bytes", unsafe.Sizeof(counter{}))
	assert.Equal(t, uintptr(24), unsafe.Sizeof(Turns{}), "Turns")
}

// A rotor's mixer, read on every turn, shares its cache line with nothing
// that is written on a turn.
func TestRotorMixHasALineOfItsOwn(t *testing.T) {
	var r rotor
	mix, clash := unsafe.Offsetof(r.mix), unsafe.Offsetof(r.clash)
	assert.GreaterOrEqual(t, clash-mix, uintptr(cacheline.Size), "mix at %d, clash at %d", mix, clash)
	last := unsafe.Offsetof(r.shards) + unsafe.Sizeof(r.shards)
	assert.GreaterOrEqual(t, mix, last, "mix after the counters")
}

// Turns nobody contends for keep one counter word: no rotor, and one
// strict rotation from where Init started it.
func TestTurns_OneCounterUncontended(t *testing.T) {
	var tr Turns
	tr.Init(1000)
	first := tr.Next(1000)
	require.Less(t, first, uint64(1000))
	for i := uint64(1); i < 100_000; i++ {
		require.Equal(t, first+i, tr.Next(1000), "turn %d", i)
	}
	assert.False(t, tr.Sharded(), "turns nobody contends for took a rotor")
	assert.Equal(t, first+100_000, tr.Word())
}

// Turns taken on two cores at once take a rotor, after which no turn
// writes the single counter word, and one goroutine's turns still rotate
// strictly on its counter.
func TestTurns_ShardsOnceContended(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two Ps for turns to contend")
	}
	var tr Turns
	tr.Init(7)
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !tr.Sharded() && time.Now().Before(deadline) {
				for i := 0; i < 1000; i++ {
					tr.Next(7)
				}
			}
		}()
	}
	wg.Wait()
	require.True(t, tr.Sharded(), "two goroutines taking turns for 30 s never made them shard")
	// (A turn that lost a swap just before the switch may still have
	// counted once past the mark: any value from it up is the mark.)
	marked := tr.Word()
	require.GreaterOrEqual(t, marked, uint64(ShardedMark))
	// A tight loop: a call that grew the stack would move it, and the
	// goroutine to another counter.
	got := make([]uint64, 7000)
	for i := range got {
		got[i] = tr.Next(7)
	}
	for i := 1; i < len(got); i++ {
		require.Equal(t, got[i-1]+1, got[i], "turn %d: one goroutine rotates strictly on its counter", i)
	}
	require.Equal(t, marked, tr.Word(), "sharded turns wrote their counter word")
}

// Adopt starts a Turns where another stands.
func TestTurns_Adopt(t *testing.T) {
	var a, b Turns
	a.Init(1 << 30)
	a.N = 7
	b.Adopt(&a)
	require.Equal(t, uint32(7), b.N)
	require.Equal(t, a.Word(), b.Next(1))
}

// Two goroutines whose stacks share a rotor's counter do not keep sharing
// it: lost swaps make the rotor draw a new mapping, and a mapping drawn at
// random separates two given stacks 15 times in 16.
func TestRotorRehashesOnClashes(t *testing.T) {
	r := newRotor(10)
	assert.Zero(t, r.mix.Load())
	r.clash.Store(clashesToRehash - 1) // one more lost swap rehashes
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r.mix.Load() == 0 {
			for i := range r.shards {
				r.shards[i].n.Add(1) // another core taking turns from every counter
			}
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for r.mix.Load() == 0 && time.Now().Before(deadline) {
		r.next()
	}
	r.mix.CompareAndSwap(0, 2) // (stops the goroutine if no rehash came)
	<-done
	mix := r.mix.Load()
	require.NotEqual(t, uint64(2), mix, "no rehash after %d lost swaps", clashesToRehash)
	assert.Equal(t, uint64(1), mix&1, "the multiplier is odd")
	apart := 0
	for trial := 0; trial < 1000; trial++ {
		m := rand.Uint64() | 1
		a, b := uint64(0x7f0000100000)>>11, uint64(0x7f0000100800)>>11
		if (a*m)>>(64-rotorShardBits) != (b*m)>>(64-rotorShardBits) {
			apart++
		}
	}
	assert.Greater(t, apart, 900, "neighbouring stacks apart under a random mix")
}
