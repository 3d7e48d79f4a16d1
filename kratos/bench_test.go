package graylbkratos_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/go-kratos/kratos/v2/selector/wrr"
	"github.com/go-kratos/kratos/v2/transport"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	graylbkratos "github.com/graylb/graylb/kratos"
)

// BenchmarkOverhead sends requests over loopback through Kratos' own
// clients to the same two Kratos servers, once picked by Kratos' default
// selector (wrr, no middleware) and once by graylb's (with Client's
// middleware), interleaved, and reports graylb's time as a ratio of the
// default's and the allocations per request graylb adds: with no rules
// (the call carries its kind), and with a 50 % canary deciding each
// call's kind (the client middleware draws once and writes the kind).
func BenchmarkOverhead(b *testing.B) {
	for _, scheme := range []string{"http", "grpc"} {
		for _, bc := range []struct {
			name   string
			rules  graylb.Rules
			gray   string
			baseMW bool
		}{
			{"no-rules", graylb.Rules{}, "false", false},
			{"canary-50", graylb.Rules{CanaryPercent: 50}, "", false},
			// The default selector's client with one middleware that writes
			// the gray header, as graylb's Client does: what is left is
			// graylb's own part, Kratos' cost of running a client
			// middleware and sending one more header aside.
			{"no-rules-base-writes-header", graylb.Rules{}, "false", true},
		} {
			b.Run(scheme+"/"+bc.name, func(b *testing.B) {
				reg := graylb.NewRegistry()
				lb, err := graylb.New(reg, graylb.WithRules(bc.rules))
				if err != nil {
					b.Fatal(err)
				}
				defer lb.Close()
				// Both instances are prod: Kratos' default selector has no gray
				// rule, and a canary-gray call falls back to them under graylb.
				for i := 0; i < 2; i++ {
					s := startServer(b, scheme, func(context.Context) (string, error) { return "ok", nil })
					register(b, reg, "svc", s.endpoint, false)
				}
				d := graylbkratos.NewDiscovery(reg)
				// Kratos' clients take the global selector: the default's
				// client is made (and, over gRPC, its connections are READY,
				// its picker built) before graylb's becomes the global one.
				selector.SetGlobalSelector(wrr.NewBuilder())
				var baseMW []middleware.Middleware
				if bc.baseMW {
					baseMW = append(baseMW, writeGray)
				}
				base := newCaller(b, scheme, "svc."+scheme, d, baseMW...)
				gb := graylbkratos.NewBuilder(lb)
				defer gb.Close()
				ctx := context.Background()
				if bc.gray != "" {
					ctx = graylb.WithValue(ctx, "gray", bc.gray)
				}
				for i := 0; i < 100; i++ {
					if _, err := base(ctx); err != nil {
						b.Fatal(err)
					}
				}
				selector.SetGlobalSelector(gb)
				subject := newCaller(b, scheme, "svc."+scheme, d, graylbkratos.Client(lb))
				for i := 0; i < 100; i++ {
					if _, err := subject(ctx); err != nil {
						b.Fatal(err)
					}
				}
				do := func(c caller) func() {
					return func() {
						if _, err := c(ctx); err != nil {
							b.Fatal(err)
						}
					}
				}
				adaptertest.Interleave(b, do(base), do(subject), "extra-allocs/req")
			})
		}
	}
}

// writeGray is a client middleware that writes the call's gray value
// (graylb.WithValue) on its header, as Kratos' metadata middleware writes
// a key.
func writeGray(next middleware.Handler) middleware.Handler {
	return func(ctx context.Context, req interface{}) (interface{}, error) {
		if tr, ok := transport.FromClientContext(ctx); ok {
			if v := graylb.ValueFrom(ctx, "gray"); v != "" {
				tr.RequestHeader().Set("gray", v)
			}
		}
		return next(ctx, req)
	}
}

// grayNodeFilter is the gray rule as a Kratos NodeFilter, run per
// request: what a Kratos service writes by hand without graylb.
func grayNodeFilter(ctx context.Context, nodes []selector.Node) []selector.Node {
	reqGray := graylb.IsGray(graylb.ValueFrom(ctx, "gray"))
	var gray, prod []selector.Node
	for _, n := range nodes {
		if graylb.IsGray(n.Metadata()["gray"]) {
			gray = append(gray, n)
		} else {
			prod = append(prod, n)
		}
	}
	switch {
	case !reqGray:
		return prod
	case len(gray) > 0:
		return gray
	default:
		return nodes
	}
}

// BenchmarkPick is the cost of one pick among n nodes (one in ten gray)
// for a gray call: graylb's Selector against Kratos' wrr with the gray
// rule as a NodeFilter, each picking and reporting done, as Kratos' clients
// do per request.
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		list := make([]selector.Node, n)
		for i := range list {
			list[i] = selector.NewNode("http", "10.0."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250+1)+":8080", &registry.ServiceInstance{
				Name: "svc", Metadata: map[string]string{"gray": fmt.Sprint(i%10 == 0)}})
		}
		ctx := graylb.WithValue(context.Background(), "gray", "true")
		run := func(b *testing.B, s selector.Selector, opts ...selector.SelectOption) {
			s.Apply(list)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				node, done, err := s.Select(ctx, opts...)
				if err != nil || !graylb.IsGray(node.Metadata()["gray"]) {
					b.Fatal(node, err)
				}
				done(ctx, selector.DoneInfo{})
			}
		}
		b.Run(fmt.Sprintf("n=%d/kratos-wrr+filter", n), func(b *testing.B) {
			run(b, wrr.NewBuilder().Build(), selector.WithNodeFilter(grayNodeFilter))
		})
		b.Run(fmt.Sprintf("n=%d/graylb", n), func(b *testing.B) {
			lb, err := graylb.New(graylb.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			gb := graylbkratos.NewBuilder(lb)
			defer gb.Close()
			run(b, gb.Build(), selector.WithNodeFilter())
		})
	}
}
