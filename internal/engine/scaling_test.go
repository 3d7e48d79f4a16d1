package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// learn registers n services of 4 instances (one gray) in a fresh
// registry and returns the time the first picks of all of them took, each
// picked once gray and once prod (a LoadBalancer learns a service at its
// first pick).
func learn(t testing.TB, n int) time.Duration {
	t.Helper()
	reg := NewRegistry()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%d", i)
		for p := 0; p < 4; p++ {
			var md []string
			if p == 3 {
				md = []string{"gray", "true"}
			}
			require.NoError(t, reg.Register(inst(names[i], 1000+p, md...)))
		}
	}
	lb, err := New(reg, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	gray := withHeaders(context.Background(), "gray", "true")
	prod := context.Background()
	start := time.Now()
	for _, name := range names {
		if _, err := lb.Pick(gray, name); err != nil {
			t.Fatal(err)
		}
		if _, err := lb.Pick(prod, name); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

// TestFirstPickScaling: learning services is linear, the time per service
// at 8 000 services about what it is at 2 000 (it grew about 4× per
// doubling while every new service copied the table of all the others).
// The smaller run goes first, the larger twice: the best of each is
// compared, which a machine's noise only makes worse.
func TestFirstPickScaling(t *testing.T) {
	if testing.Short() {
		t.Skip("times thousands of services")
	}
	per := func(n int) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 2 {
			best = min(best, learn(t, n)/time.Duration(n))
		}
		return best
	}
	small, large := per(2000), per(8000)
	ratio := float64(large) / float64(small)
	t.Logf("per service: %v at 2 000, %v at 8 000 (ratio %.2f)", small, large, ratio)
	require.Less(t, ratio, 2.0, "learning 8 000 services cost %.2f× per service what 2 000 did", ratio)
}

// BenchmarkPickAmongServices: a pick on one of many known services (the
// table's buckets, not its inline few).
func BenchmarkPickAmongServices(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			reg := NewRegistry()
			for i := 0; i < n; i++ {
				for p := 0; p < 4; p++ {
					if err := reg.Register(inst(fmt.Sprintf("svc-%d", i), 1000+p)); err != nil {
						b.Fatal(err)
					}
				}
			}
			lb, err := New(reg)
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			ctx := context.Background()
			for i := 0; i < n; i++ {
				if _, err := lb.Pick(ctx, fmt.Sprintf("svc-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			name := fmt.Sprintf("svc-%d", n/2)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := lb.Pick(ctx, name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
