package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

var benchSizes = []int{10, 100, 1000, 10000}

// benchList: half gray; a quarter v1, a quarter v2, half unversioned.
func benchList(n int) []Instance {
	list := make([]Instance, n)
	for i := range list {
		md := map[string]string{"gray": "false"}
		if i%2 == 1 {
			md["gray"] = "true"
		}
		switch i % 4 {
		case 0:
			md["version"] = "v1"
		case 3:
			md["version"] = "v2"
		}
		list[i] = Instance{Service: "svc", Host: fmt.Sprintf("10.0.%d.%d", i/250, i%250), Port: 8080, Weight: 1, Healthy: true, Enabled: true, Metadata: md}
	}
	return list
}

func benchContexts() [2]context.Context {
	return [2]context.Context{
		withHeaders(context.Background(), "gray", "true", "version", "v1"),
		withHeaders(context.Background(), "gray", "false"),
	}
}

func benchLB(b *testing.B, n int) *LoadBalancer {
	lb, err := New(&fakeSource{list: benchList(n)}, WithContextHandler(testHandler), WithFilters(NewVersionFilter()))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := lb.Pick(context.Background(), "svc"); err != nil {
		b.Fatal(err)
	}
	return lb
}

func BenchmarkPick(b *testing.B) {
	ctxs := benchContexts()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			lb := benchLB(b, n)
			defer lb.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := lb.Pick(ctxs[i&1], "svc"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPickParallel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			lb := benchLB(b, n)
			defer lb.Close()
			pickInParallel(b, lb)
		})
	}
}

// pickInParallel picks on every P, alternating gray and prod requests.
func pickInParallel(b *testing.B, lb *LoadBalancer) {
	ctxs := benchContexts()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := lb.Pick(ctxs[i&1], "svc"); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{10000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			lb := benchLB(b, n)
			defer lb.Close()
			list := benchList(n)
			s := lb.services.Load().get("svc")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.mu.Lock()
				lb.rebuild(s, list)
				s.mu.Unlock()
			}
		})
	}
}

// seedPort is a faithful port of seed 000's per-request algorithm: copy the
// instance list, run ServerGrayFilter.apply on each instance (normalising
// both values through the true/false map), fall back to every instance when
// the request is gray and no instance is, then round robin. One deviation
// favours the baseline: the fall-back map is built once per request, where
// the seed rebuilds it for each non-matching instance. Two slips of the seed
// are corrected so that the port routes as the gray rule says: its loop looks
// values up in the new, empty local map that shadows the normalisation map
// (so every instance counts as prod and gray requests always fall back), and
// it keeps the value's letter case ("True" would not match "true").
type seedPort struct {
	servers    []Instance
	serverGray string
	pos        atomic.Uint64
}

var seedFlags = map[string]string{"false": "false", "true": "true"}

func (s *seedPort) choose(ctx context.Context) (Instance, bool) {
	servers := append([]Instance(nil), s.servers...) // the supplier's copy
	grayFromRequest := testHandler.Value(ctx, "gray")
	if grayFromRequest == "" {
		grayFromRequest = ValueFrom(ctx, "gray")
	}
	if grayFromRequest == "" {
		grayFromRequest = s.serverGray
	}
	req, ok := seedFlags[strings.ToLower(grayFromRequest)]
	if !ok {
		req = "false"
	}
	var fallback map[string]string
	filtered := make([]Instance, 0, len(servers))
	for _, in := range servers {
		md := in.Metadata["gray"]
		meta, ok := seedFlags[strings.ToLower(md)]
		if !ok {
			meta = "false"
		}
		result := strings.EqualFold(meta, req)
		if !result && req == "true" {
			if fallback == nil {
				fallback = map[string]string{}
				for _, x := range servers {
					v, ok := seedFlags[strings.ToLower(x.Metadata["gray"])]
					if !ok {
						v = "false"
					}
					fallback[v] = v
				}
			}
			if _, ok := fallback["true"]; !ok {
				result = true
			}
		}
		if result {
			filtered = append(filtered, in)
		}
	}
	if len(filtered) == 0 {
		return Instance{}, false
	}
	return filtered[int(s.pos.Add(1)%uint64(len(filtered)))], true
}

func BenchmarkSeedPort(b *testing.B) {
	ctxs := benchContexts()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			s := &seedPort{servers: benchList(n), serverGray: "false"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, ok := s.choose(ctxs[i&1]); !ok {
					b.Fatal("no instance")
				}
			}
		})
	}
}

// TestSeedPortAgreesWithGrayFilter keeps the baseline honest: on the same
// lists it picks from the same candidate sets as graylb's GrayFilter.
func TestSeedPortAgreesWithGrayFilter(t *testing.T) {
	for _, m := range instanceMixes {
		for _, rv := range requestValues {
			s := &seedPort{servers: m.list, serverGray: "false"}
			ctx := withHeaders(context.Background(), "gray", rv.v)
			want := oracle(IsGray(rv.v), m.list)
			seen := map[string]bool{}
			for i := 0; i < 3*len(m.list)+1; i++ {
				in, ok := s.choose(ctx)
				if !ok {
					break
				}
				seen[in.Addr()] = true
			}
			if len(seen) != len(want) {
				t.Fatalf("%s/%s: seed port picked %v, want %v", m.name, rv.name, seen, addrs(want))
			}
			for _, w := range want {
				if !seen[w.Addr()] {
					t.Fatalf("%s/%s: seed port never picked %s", m.name, rv.name, w.Addr())
				}
			}
		}
	}
}

// BenchmarkPickParallelPolicy compares the policies under parallel picks at
// 100 instances: run with -cpu 1,2 to see which contend.
func BenchmarkPickParallelPolicy(b *testing.B) {
	for _, pc := range []struct {
		name string
		p    Policy
	}{{"round_robin", RoundRobin()}, {"strict_round_robin", StrictRoundRobin()}, {"random", Random()}, {"weighted_round_robin", WeightedRoundRobin()}} {
		b.Run(pc.name, func(b *testing.B) {
			lb, err := New(&fakeSource{list: benchList(100)}, WithContextHandler(testHandler), WithFilters(NewVersionFilter()), WithPolicy(pc.p))
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			pickInParallel(b, lb)
		})
	}
}

// weightedList is benchList(n) with Nacos-style weights: integers, two
// decimal fractions and a few far apart (0.01 next to 10 000).
func weightedList(n int) []Instance {
	list := benchList(n)
	for i := range list {
		switch i % 4 {
		case 0:
			list[i].Weight = float64(1 + i%100)
		case 1:
			list[i].Weight = float64(1+i%997) / 100
		case 2:
			list[i].Weight = 1.5
		default:
			list[i].Weight = []float64{0.01, 10000, 0.3, 5}[i/4%4]
		}
	}
	return list
}

// BenchmarkWeightedBuild builds the weighted round-robin schedule alone.
func BenchmarkWeightedBuild(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			list := weightedList(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				WeightedRoundRobin().NewPicker(list)
			}
		})
	}
}

// BenchmarkUpdateWeighted is BenchmarkUpdate with WeightedRoundRobin and
// varied weights: a whole routing rebuild, every partition's schedule.
func BenchmarkUpdateWeighted(b *testing.B) {
	for _, n := range []int{10000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			list := weightedList(n)
			lb, err := New(&fakeSource{list: list}, WithContextHandler(testHandler), WithFilters(NewVersionFilter()), WithPolicy(WeightedRoundRobin()))
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			if _, err := lb.Pick(context.Background(), "svc"); err != nil {
				b.Fatal(err)
			}
			s := lb.services.Load().get("svc")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.mu.Lock()
				lb.rebuild(s, list)
				s.mu.Unlock()
			}
		})
	}
}
