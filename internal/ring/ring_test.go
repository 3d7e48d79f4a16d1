package ring

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Against a model (a slice, newest first, cut to the size): any sequence
// of pushes and removals leaves the same values in the same order, and a
// push reports exactly the value the model drops.
func TestRing_MatchesAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for run := 0; run < 500; run++ {
		size := rng.IntN(6)
		r := New[int](size)
		var model []int
		for step := 0; step < 60; step++ {
			if len(model) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(model))
				r.Remove(i)
				model = append(model[:i:i], model[i+1:]...)
			} else {
				v := rng.IntN(1000)
				dropped, full := r.Push(v)
				model = append([]int{v}, model...)
				if len(model) > size {
					require.True(t, full, "run %d step %d: a full ring dropped nothing", run, step)
					require.Equal(t, model[size], dropped, "run %d step %d", run, step)
					model = model[:size]
				} else {
					require.False(t, full, "run %d step %d: dropped %d from a ring not full", run, step, dropped)
				}
			}
			require.Equal(t, len(model), r.Len())
			require.Equal(t, size, r.Cap())
			got := r.Newest(nil)
			if len(model) == 0 {
				require.Empty(t, got)
			} else {
				require.Equal(t, model, got, "run %d step %d", run, step)
			}
			for i, v := range model {
				require.Equal(t, v, r.At(i))
			}
		}
	}
}

// The zero Ring takes nothing: a push hands the value straight back.
func TestRing_ZeroHoldsNothing(t *testing.T) {
	var r Ring[string]
	dropped, full := r.Push("a")
	require.True(t, full)
	require.Equal(t, "a", dropped)
	require.Zero(t, r.Len())
	require.Empty(t, r.Newest(nil))
}

// A removed value's slot is cleared, so the ring keeps nothing alive that
// it no longer holds.
func TestRing_RemoveClearsTheSlot(t *testing.T) {
	for _, i := range []int{0, 1} {
		r := New[*int](3)
		vals := []*int{new(int), new(int)} // oldest first
		r.Push(vals[0])
		r.Push(vals[1])
		gone := vals[1-i]
		r.Remove(i)
		for _, p := range r.buf {
			require.NotSame(t, gone, p, "Remove(%d): the removed value is still referenced", i)
		}
		require.Equal(t, []*int{vals[i]}, r.Newest(nil))
	}
}
