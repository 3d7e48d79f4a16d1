package grpcctx

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// blockingServer's handler blocks until the test ends, whatever its
// context says, or answers after delay when delay is set.
type blockingServer struct {
	testServer
	delay   time.Duration
	release chan struct{}
}

func (s *blockingServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-s.release:
		}
		return s.testServer.UnaryCall(ctx, req)
	}
	<-s.release
	return nil, ctx.Err()
}

// rpcTally counts RPCs by outcome after a point in time.
type rpcTally struct {
	from             time.Time
	gray, grayFailed atomic.Int64
	prod, prodOnGray atomic.Int64
	prodFailed       atomic.Int64
}

// driveRPCs sends gray and prod RPCs from several goroutines, each with
// its own deadline, until stop, and tallies those that start after
// tl.from.
func driveRPCs(c testgrpc.TestServiceClient, deadline time.Duration, tl *rpcTally, stop <-chan struct{}) {
	var wg sync.WaitGroup
	one := func(gray bool) {
		defer wg.Done()
		g := "false"
		if gray {
			g = "true"
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", g), deadline)
			r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			cancel()
			if start.Before(tl.from) {
				continue
			}
			if gray {
				tl.gray.Add(1)
				if err != nil {
					tl.grayFailed.Add(1)
				}
				continue
			}
			tl.prod.Add(1)
			if err != nil {
				tl.prodFailed.Add(1)
			}
			if r.GetServerId() == "gray" {
				tl.prodOnGray.Add(1)
			}
		}
	}
	for range 6 {
		wg.Add(1)
		go one(true)
	}
	for range 2 {
		wg.Add(1)
		go one(false)
	}
	wg.Wait()
}

// TestBalancer_HangingGrayInstance: a gray instance whose handler blocks,
// answers after twice the deadline, or never completes the HTTP/2
// handshake, beside 2 prod instances, alone or beside a working gray one,
// under round robin and P2C, with default outlier detection and a 1 s
// deadline. From 5 s after the hang starts at most 1 % of gray RPCs fail,
// and no prod RPC reaches gray.
func TestBalancer_HangingGrayInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 7 s per variant")
	}
	const deadline = time.Second
	gray := map[string]string{"gray": "true"}
	for _, hang := range []string{"blocked", "slow", "handshake"} {
		for _, beside := range []bool{false, true} {
			for _, pol := range []string{"roundrobin", "p2c"} {
				name := hang + "/alone/" + pol
				if beside {
					name = hang + "/beside-working-gray/" + pol
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					reg := graylb.NewRegistry()
					serve(t, reg, "svc", &testServer{name: "prod"}, nil)
					serve(t, reg, "svc", &testServer{name: "prod"}, nil)
					if beside {
						serve(t, reg, "svc", &testServer{name: "gray"}, gray)
					}
					opts := []graylb.Option{graylb.WithOutlierDetection(graylb.OutlierConfig{})}
					if pol == "p2c" {
						opts = append(opts, graylb.WithPolicy(policy.P2C()))
					}
					_, c := dialLB(t, reg, "svc", opts...)

					start := time.Now()
					switch hang {
					case "handshake":
						a := silentListener(t)
						require.NoError(t, reg.Register(graylb.NewInstance("svc", a.IP.String(), a.Port, gray)))
					default:
						s := &blockingServer{testServer: testServer{name: "gray"}, release: make(chan struct{})}
						if hang == "slow" {
							s.delay = 2 * deadline
						}
						t.Cleanup(func() { close(s.release) }) // before the server stops: cleanups run last first
						serveServer(t, reg, "svc", s, gray)
					}
					tl := &rpcTally{from: start.Add(5 * time.Second)}
					stop := make(chan struct{})
					time.AfterFunc(7*time.Second-time.Since(start), func() { close(stop) })
					driveRPCs(c, deadline, tl, stop)

					t.Logf("%s from 5 s: %d of %d gray RPCs failed; %d of %d prod failed, %d on gray", name,
						tl.grayFailed.Load(), tl.gray.Load(), tl.prodFailed.Load(), tl.prod.Load(), tl.prodOnGray.Load())
					require.LessOrEqual(t, tl.grayFailed.Load()*100, tl.gray.Load(), "more than 1 % of gray RPCs failed from 5 s after the hang started")
					require.Greater(t, tl.gray.Load(), int64(50), "too few gray RPCs to measure")
					require.Zero(t, tl.prodOnGray.Load(), "prod RPCs reached gray")
					require.LessOrEqual(t, tl.prodFailed.Load()*100, tl.prod.Load(), "more than 1 % of prod RPCs failed") // healthy instances: a loaded machine's odd late answer at most
				})
			}
		}
	}
}

// deadlineServer answers every RPC with a DeadlineExceeded status of its
// own (its downstream ran out of time): an answer.
type deadlineServer struct{ testServer }

func (s *deadlineServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.hits.Add(1)
	return nil, status.Error(codes.DeadlineExceeded, "downstream deadline")
}

// TestBalancer_ServerDeadlineExceededIsAnAnswer: a DeadlineExceeded status
// the server sent is an answer, not a hang: under round robin and P2C it
// never counts toward ejection, even with one failure enough to eject.
func TestBalancer_ServerDeadlineExceededIsAnAnswer(t *testing.T) {
	for _, pol := range []string{"roundrobin", "p2c"} {
		t.Run(pol, func(t *testing.T) {
			reg := graylb.NewRegistry()
			serve(t, reg, "svc", &testServer{name: "prod"}, nil)
			srv := &deadlineServer{testServer{name: "gray"}}
			serveServer(t, reg, "svc", srv, map[string]string{"gray": "true"})
			var ejections atomic.Int64
			opts := []graylb.Option{graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1,
				OnEjection: func(e graylb.Ejection) { ejections.Add(1) }})}
			if pol == "p2c" {
				opts = append(opts, graylb.WithPolicy(policy.P2C()))
			}
			_, c := dialLB(t, reg, "svc", opts...)
			for srv.hits.Load() < 20 {
				_, err := call(t, c, "true")
				require.Error(t, err)
				if status.Code(err) != codes.DeadlineExceeded {
					require.Equal(t, codes.Unavailable, status.Code(err), "only a connection being made may fail otherwise") // the first RPCs
				}
			}
			require.Zero(t, ejections.Load(), "a DeadlineExceeded the server sent ejected it")
		})
	}
}
