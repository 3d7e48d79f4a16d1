package grpcctx

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/benchutil"
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
// kind), and with a 50 % canary deciding each call's kind (the client
// interceptor draws once and writes the kind on the call).
func BenchmarkBalancerOverhead(b *testing.B) {
	for _, bc := range []struct {
		name  string
		rules graylb.Rules
		md    []string
	}{
		{"no-rules", graylb.Rules{}, []string{"gray", "false"}},
		{"canary-50", graylb.Rules{CanaryPercent: 50}, nil},
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

			ctx := metadata.AppendToOutgoingContext(context.Background(), bc.md...)
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
			for i := 0; i < 100; i++ {
				rrDo()
				glDo()
			}
			benchutil.Interleave(b, rrDo, glDo, "extra-allocs/rpc")
		})
	}
}
