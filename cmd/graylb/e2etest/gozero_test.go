package e2etest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/redis/go-redis/v9"
	"github.com/zeromicro/go-zero/core/conf"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// testService answers UnaryCall, failing every errEvery-th call.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
	errEvery int64
	calls    atomic.Int64
}

func (s *testService) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if n := s.calls.Add(1); s.errEvery > 0 && n%s.errEvery == 0 {
		return nil, status.Error(codes.Internal, "gray build failure")
	}
	return &testgrpc.SimpleResponse{}, nil
}

// A rollout whose callers are go-zero clients: zrpc clients made by
// gozero.NewClient pick through graylb's gRPC balancer, and otelgraylb's
// CallObserver metrics of those calls are what the rollout judges.
func TestRolloutGoZeroCallers(t *testing.T) {
	needCommand(t)
	for _, tc := range rolloutCases {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			rdb.Set(context.Background(), rulesKey, `{"grayUsers": ["qa-1"]}`, 0)

			reg := graylb.NewRegistry()
			for i := 0; i < 3; i++ {
				gray := i == 2
				svc := &testService{}
				if gray {
					svc.errEvery = tc.errEvery
				}
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				s := grpc.NewServer()
				testgrpc.RegisterTestServiceServer(s, svc)
				go s.Serve(l)
				t.Cleanup(s.Stop)
				md := map[string]string{}
				if gray {
					md["gray"] = "true"
				}
				port := l.Addr().(*net.TCPAddr).Port
				if err := reg.Register(graylb.NewInstance(releasedService, "127.0.0.1", port, md)); err != nil {
					t.Fatal(err)
				}
			}
			lb, metrics := observedLB(t, reg, addr)
			var c zrpc.RpcClientConf
			if err := conf.FillDefault(&c); err != nil {
				t.Fatal(err)
			}
			c.Target = gozero.Target(releasedService)
			cli, err := gozero.NewClient(lb, c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cli.Conn().Close() })
			client := testgrpc.NewTestServiceClient(cli.Conn())
			var ok, bad atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			t.Cleanup(func() { cancel(); wg.Wait() })
			for w := 0; w < 2; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err == nil {
							ok.Add(1)
						} else if ctx.Err() == nil {
							bad.Add(1)
						}
						select {
						case <-ctx.Done():
						case <-time.After(4 * time.Millisecond):
						}
					}
				}()
			}
			prom := startPrometheus(t, metrics)
			code, _, errOut := rollout(t, releasedService, addr, registryOf(t, reg, releasedService), prom)
			checkOutcome(t, addr, code, errOut, tc.code, tc.canary, tc.closed, lb)
			t.Logf("go-zero caller: %d ok, %d failed calls", ok.Load(), bad.Load())
		})
	}
}
