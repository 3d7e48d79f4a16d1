package gozero_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"github.com/graylb/graylb/gozero"
	"github.com/zeromicro/go-zero/zrpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// BenchmarkZrpcOverhead sends unary calls over loopback to the same two
// zrpc servers through a zrpc client with go-zero's default configuration
// (its p2c balancer over direct:// endpoints, its interceptors) and through
// the same client routed by graylb (gozero.NewClient), interleaved, and
// reports graylb's time as a ratio of p2c's and the allocations per call
// graylb adds: with no rules (the call carries its kind), and with a 50 %
// canary deciding each call's kind.
func BenchmarkZrpcOverhead(b *testing.B) {
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
			var addrs []string
			for _, name := range []string{"one", "two"} {
				addrs = append(addrs, zrpcServer(b, reg, "svc", false, &named{name: name}, nil))
			}
			lb, err := graylb.New(reg, graylb.WithRules(bc.rules))
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			gcli, err := gozero.NewClient(lb, clientConf(b, gozero.Target("svc")))
			if err != nil {
				b.Fatal(err)
			}
			defer gcli.Conn().Close()
			pconf := clientConf(b, "")
			pconf.Endpoints = addrs
			pcli, err := zrpc.NewClient(pconf)
			if err != nil {
				b.Fatal(err)
			}
			defer pcli.Conn().Close()
			gc, pc := testgrpc.NewTestServiceClient(gcli.Conn()), testgrpc.NewTestServiceClient(pcli.Conn())

			ctx := metadata.AppendToOutgoingContext(context.Background(), bc.md...)
			req := &testgrpc.SimpleRequest{}
			p2cDo := func() {
				if _, err := pc.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			glDo := func() {
				if _, err := gc.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < 100; i++ {
				p2cDo()
				glDo()
			}
			adaptertest.Interleave(b, p2cDo, glDo, "extra-allocs/call")
		})
	}
}
