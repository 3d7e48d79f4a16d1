package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The aggregate holds the last MaxUnroutedRecent distinct names, newest
// first, and counts every failure, whatever the sequence of names.
func TestUnroutedLogProperty(t *testing.T) {
	require.Equal(t, "<unrouted>", UnroutedService, "the name metrics and dashboards see")
	require.ErrorIs(t, ValidateServiceName(UnroutedService), ErrInvalidService, "no service can be counted under it")
	rng := rand.New(rand.NewSource(1))
	for run := 0; run < 200; run++ {
		var l unroutedLog
		var seq []string
		for i, n := 0, rng.Intn(40); i < n; i++ {
			name := fmt.Sprintf("n%d", rng.Intn(1+rng.Intn(16)))
			seq = append(seq, name)
			l.record(name, Kind(rng.Intn(2)), fmt.Errorf("no %s", name))
		}
		// The model: the distinct names, by their last failure, newest first.
		var want []string
		seen := map[string]bool{}
		for i := len(seq) - 1; i >= 0 && len(want) < MaxUnroutedRecent; i-- {
			if !seen[seq[i]] {
				seen[seq[i]] = true
				want = append(want, seq[i])
			}
		}
		st := l.state()
		require.Equal(t, uint64(len(seq)), st.Failed)
		got := []string{}
		for _, p := range st.Recent {
			got = append(got, p.Service)
			require.Equal(t, "no "+p.Service, p.Error)
		}
		if want == nil {
			want = []string{}
		}
		require.Equal(t, want, got, "after %v", seq)
	}
}

// Many goroutines failing at once: every failure counted, the list
// bounded and free of duplicates (run with -race).
func TestUnroutedConcurrent(t *testing.T) {
	lb, err := New(&emptySource{})
	require.NoError(t, err)
	defer lb.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				_, _ = lb.Pick(context.Background(), fmt.Sprintf("g%d-%d", g, i%20))
				_ = lb.Unrouted()
			}
		}(g)
	}
	wg.Wait()
	st := lb.Unrouted()
	require.Equal(t, uint64(1000), st.Failed)
	require.Len(t, st.Recent, MaxUnroutedRecent)
	seen := map[string]bool{}
	for _, p := range st.Recent {
		require.False(t, seen[p.Service], "listed twice: %s", p.Service)
		seen[p.Service] = true
	}
}

// A name failing again is kept as the log's own copy, not as the caller's
// string, which may be a slice of a much larger buffer (a request line, a
// header block) that the log would otherwise keep alive.
func TestUnroutedLog_KeepsItsOwnCopyOfANameListedAgain(t *testing.T) {
	var l unroutedLog
	l.record(strings.Clone("svc-a"), Prod, errors.New("no svc-a"))
	buf := strings.Repeat("x", 1<<20) + "svc-a"
	l.record(buf[len(buf)-len("svc-a"):], Gray, errors.New("no svc-a"))
	st := l.state()
	require.Len(t, st.Recent, 1)
	require.Equal(t, "svc-a", st.Recent[0].Service)
	require.Equal(t, Gray, st.Recent[0].Kind)
	lo := uintptr(unsafe.Pointer(unsafe.StringData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(st.Recent[0].Service)))
	require.False(t, p >= lo && p < lo+uintptr(len(buf)), "the log keeps the caller's buffer of %d bytes alive", len(buf))
}
