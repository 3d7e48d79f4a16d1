package graylbkratos_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
)

// chainKinds splits an answer a-<kind>>b-<kind> into the kinds of its
// hops.
func chainKinds(t *testing.T, got string) (a, b string) {
	t.Helper()
	parts := strings.Split(got, ">")
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "a-") || !strings.HasPrefix(parts[1], "b-") {
		t.Fatalf("answer %q is not a-<kind>>b-<kind>", got)
	}
	return parts[0][2:], parts[1][2:]
}

func newLB(t *testing.T, reg *graylb.Registry, rules graylb.Rules, opts ...graylb.Option) *graylb.LoadBalancer {
	t.Helper()
	lb, err := graylb.New(reg, append([]graylb.Option{graylb.WithRules(rules)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	return lb
}

// TestChainCanary: under a 50 % canary, requests without a user id split
// between the kinds, and every hop of one request lands on the same kind:
// the edge decides once and writes the kind for the next hops.
func TestChainCanary(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		t.Run(scheme, func(t *testing.T) {
			reg := graylb.NewRegistry()
			lb := newLB(t, reg, graylb.Rules{CanaryPercent: 50})
			c := startChain(t, lb, reg, scheme)
			const n = 1000
			mixed, gray := 0, 0
			for i := 0; i < n; i++ {
				got, err := c.call(nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				a, b := chainKinds(t, got)
				if a != b {
					mixed++
					if mixed <= 3 {
						t.Errorf("request %d: mixed chain %q", i, got)
					}
				}
				if a == "gray" {
					gray++
				}
			}
			// 50 % of 1000: 500 ± 16 (one standard deviation); 400-600 is
			// over six deviations either side.
			if mixed != 0 || gray < 400 || gray > 600 {
				t.Fatalf("%d mixed chains in %d, %d gray; want 0 mixed and 400-600 gray", mixed, n, gray)
			}
			t.Logf("%s: 0 mixed chains in %d, %d gray", scheme, n, gray)
		})
	}
}

// TestChainKinds: prod never reaches gray, gray users and gray: true reach
// gray, gray: false stays prod under the canary, and every hop agrees.
func TestChainKinds(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		t.Run(scheme, func(t *testing.T) {
			reg := graylb.NewRegistry()
			lb := newLB(t, reg, graylb.Rules{CanaryPercent: 50, GrayUsers: []string{"u-gray"}})
			c := startChain(t, lb, reg, scheme)
			for _, tc := range []struct {
				name    string
				headers map[string]string
				want    string
			}{
				{"gray header", map[string]string{"gray": "true"}, "gray"},
				{"gray header, any case", map[string]string{"gray": "TRUE"}, "gray"},
				{"gray false under the canary", map[string]string{"gray": "false"}, "prod"},
				{"junk is prod", map[string]string{"gray": "yes"}, "prod"},
				{"gray user", map[string]string{"uid": "u-gray"}, "gray"},
				{"gray user and gray false", map[string]string{"uid": "u-gray", "gray": "false"}, "gray"},
			} {
				for i := 0; i < 50; i++ {
					got, err := c.call(tc.headers)
					if err != nil {
						t.Fatalf("%s: %v", tc.name, err)
					}
					if a, b := chainKinds(t, got); a != tc.want || b != tc.want {
						t.Fatalf("%s: request %d answered %q, want %s at every hop", tc.name, i, got, tc.want)
					}
				}
			}
		})
	}
}

// TestChainProdNeverGray: without rules every request that is not gray
// stays on prod at every hop.
func TestChainProdNeverGray(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		t.Run(scheme, func(t *testing.T) {
			reg := graylb.NewRegistry()
			lb := newLB(t, reg, graylb.Rules{})
			c := startChain(t, lb, reg, scheme)
			cases := []map[string]string{nil, {"gray": ""}, {"gray": "false"}, {"gray": "1"}, {"uid": "someone"}}
			if scheme == "grpc" {
				// (HTTP servers strip a header value's leading blanks.)
				cases = append(cases, map[string]string{"gray": " true"})
			}
			for i, h := range cases {
				for j := 0; j < 50; j++ {
					got, err := c.call(h)
					if err != nil {
						t.Fatal(err)
					}
					if got != "a-prod>b-prod" {
						t.Fatalf("case %d (%v): %q reached gray", i, h, got)
					}
				}
			}
		})
	}
}

// TestChainUntrustedEdge: at an edge whose callers are untrusted, the
// caller's gray header and user id are ignored, in any letter case, and
// the edge settles the kind for the next hops (prod), whatever the
// caller sent.
func TestChainUntrustedEdge(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		t.Run(scheme, func(t *testing.T) {
			reg := graylb.NewRegistry()
			lb := newLB(t, reg, graylb.Rules{GrayUsers: []string{"u-gray"}})
			var warm atomic.Bool // trusted while the chain warms up
			warm.Store(true)
			c := startChain(t, lb, reg, scheme, graylbkratos.WithTrusted(func(context.Context) bool { return warm.Load() }))
			warm.Store(false)
			for _, h := range []map[string]string{{"gray": "true"}, {"GRAY": "true"}, {"uid": "u-gray"}, {"Uid": "u-gray", "Gray": "True"}} {
				for j := 0; j < 20; j++ {
					got, err := c.call(h)
					if err != nil {
						t.Fatal(err)
					}
					if got != "a-prod>b-prod" {
						t.Fatalf("untrusted %v: %q reached gray", h, got)
					}
				}
			}
		})
	}
}

// TestChainUntrustedUser: at an untrusted edge the user id the program
// authenticated (WithUser) still makes a gray user gray at every hop.
func TestChainUntrustedUser(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		t.Run(scheme, func(t *testing.T) {
			reg := graylb.NewRegistry()
			lb := newLB(t, reg, graylb.Rules{GrayUsers: []string{"u-gray"}})
			var warm atomic.Bool // trusted, without the program's user, while the chain warms up
			warm.Store(true)
			c := startChain(t, lb, reg, scheme,
				graylbkratos.WithTrusted(func(context.Context) bool { return warm.Load() }),
				graylbkratos.WithUser(func(ctx context.Context) string {
					if warm.Load() {
						return ""
					}
					return "u-gray"
				}))
			warm.Store(false)
			got, err := c.call(map[string]string{"gray": "false", "uid": "someone"})
			if err != nil {
				t.Fatal(err)
			}
			if got != "a-gray>b-gray" {
				t.Fatalf("the program's gray user answered %q, want gray at every hop", got)
			}
		})
	}
}
