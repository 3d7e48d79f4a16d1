package engine

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkPickTraffic is BenchmarkPick's gray+version pick at 100 and
// 10000 instances with traffic management off and on,
// in one run: outlier detection (Stats kept, nothing ejected), five match
// rules (the request matches none, so every rule is read), P2C, and all
// of them together with a call reported per pick.
func BenchmarkPickTraffic(b *testing.B) {
	rules, err := ParseRules([]byte(matchDoc))
	if err != nil {
		b.Fatal(err)
	}
	ctxs := [2]context.Context{
		withHeaders(context.Background(), "gray", "true", "version", "v1"),
		withHeaders(context.Background(), "x-none", "1", "version", "v1"), // undecided: the matches run
	}
	for _, n := range []int{100, 10000} {
		for _, c := range []struct {
			name   string
			opts   []Option
			report bool
		}{
			{"off", nil, false},
			{"ejection", []Option{WithOutlierDetection(OutlierConfig{})}, false},
			{"matches", []Option{WithRules(rules)}, false},
			{"p2c", []Option{WithPolicy(P2C())}, false},
			{"all+report", []Option{WithOutlierDetection(OutlierConfig{}), WithRules(rules), WithPolicy(P2C())}, true},
		} {
			b.Run(fmt.Sprintf("instances=%d/%s", n, c.name), func(b *testing.B) {
				opts := append([]Option{WithContextHandler(testHandler), WithFilters(NewVersionFilter())}, c.opts...)
				lb, err := New(&fakeSource{list: benchList(n)}, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer lb.Close()
				if _, err := lb.Pick(context.Background(), "svc"); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r, err := lb.routeReq(ctxs[i&1], "svc")
					if err != nil {
						b.Fatal(err)
					}
					if c.report {
						r.Start().Done(true)
					} else {
						_ = r.Next()
					}
				}
			})
		}
	}
}
