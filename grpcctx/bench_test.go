package grpcctx

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// BenchmarkBalancerOverhead sends unary RPCs over loopback to the same two
// backends through the graylb balancer and through grpc's round_robin,
// interleaved, and reports graylb's time as a ratio of round_robin's and
// the allocations per RPC graylb adds: with no rules (the call carries its
// kind), with a 50 % canary deciding each call's kind, and with a match
// rule giving the call a lane (the decision goes to the next hop as one
// header, two with the lane). The rr+header rows are the baselines:
// round_robin with the caller appending one header to each call
// (appended), or sending a context that already carries it (premade), so
// the table says how much of graylb's remainder is grpc-go's own cost of a
// header.
func BenchmarkBalancerOverhead(b *testing.B) {
	lane := graylb.Rules{Matches: []graylb.Match{{Key: "x-lane", Prefix: "feat-", Version: "feat-42"}}}
	for _, bc := range []struct {
		name  string
		rules graylb.Rules
		md    []string
		// rr: the subject is round_robin too, each call's context made by
		// rrCtx (the baselines' rows).
		rrCtx func(context.Context) context.Context
	}{
		{"no-rules", graylb.Rules{}, []string{"gray", "false"}, nil},
		{"canary-50", graylb.Rules{CanaryPercent: 50}, nil, nil},
		{"match-rule", lane, []string{"x-lane", "feat-1"}, nil},
		{"rr+header-appended", graylb.Rules{}, nil, func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "gray", "true")
		}},
		{"rr+header-premade", graylb.Rules{}, nil, func() func(context.Context) context.Context {
			pre := metadata.AppendToOutgoingContext(context.Background(), "gray", "true")
			return func(context.Context) context.Context { return pre }
		}()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := graylb.NewRegistry()
			a1 := serve(b, reg, "svc", &testServer{name: "one"}, nil)
			a2 := serve(b, reg, "svc", &testServer{name: "two"}, nil)
			gc := dial(b, reg, "svc", graylb.WithRules(bc.rules))

			r := manual.NewBuilderWithScheme("bench")
			r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a1.Addr()}, {Addr: a2.Addr()}}})
			conn, err := grpc.NewClient("bench:///svc", grpc.WithResolvers(r),
				grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			rc := testgrpc.NewTestServiceClient(conn)

			ctx := context.Background() // a call without metadata of its own
			if len(bc.md) > 0 {
				ctx = metadata.AppendToOutgoingContext(ctx, bc.md...)
			}
			req := &testgrpc.SimpleRequest{}
			rrDo := func() {
				if _, err := rc.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			glDo := func() {
				if _, err := gc.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			if bc.rrCtx != nil {
				glDo = func() {
					if _, err := rc.UnaryCall(bc.rrCtx(ctx), req); err != nil {
						b.Fatal(err)
					}
				}
			}
			for i := 0; i < 100; i++ {
				rrDo()
				glDo()
			}
			adaptertest.Interleave(b, rrDo, glDo, "extra-allocs/rpc")
		})
	}
}
