package grpcctx

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// testServer answers with its name, after its next hop's answer when it
// has one: "middle>backend".
type testServer struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	next testgrpc.TestServiceClient
	hits atomic.Int64
}

func (s *testServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.hits.Add(1)
	id := s.name
	if s.next != nil {
		r, err := s.next.UnaryCall(ctx, req)
		if err != nil {
			return nil, err
		}
		id += ">" + r.GetServerId()
	}
	return &testgrpc.SimpleResponse{ServerId: id}, nil
}

func (s *testServer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	id := s.name
	if s.next != nil {
		st, err := s.next.StreamingOutputCall(stream.Context(), req)
		if err != nil {
			return err
		}
		r, err := st.Recv()
		if err != nil {
			return err
		}
		id += ">" + string(r.GetPayload().GetBody())
	}
	return stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(id)}})
}

// serve starts srv on loopback and registers it as an instance of service.
func serve(t testing.TB, reg *graylb.Registry, service string, srv *testServer, md map[string]string) graylb.Instance {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(ServerOptions(nil)...)
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	a := lis.Addr().(*net.TCPAddr)
	in := graylb.NewInstance(service, a.IP.String(), a.Port, md)
	require.NoError(t, reg.Register(in))
	return in
}

func dial(t testing.TB, reg *graylb.Registry, service string, opts ...graylb.Option) testgrpc.TestServiceClient {
	t.Helper()
	lb, err := graylb.New(reg, append([]graylb.Option{graylb.WithContextHandler(Handler())}, opts...)...)
	require.NoError(t, err)
	conn, err := grpc.NewClient("graylb:///"+service, append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(); lb.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

func call(t testing.TB, c testgrpc.TestServiceClient, gray string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if gray != "-" {
		ctx = metadata.AppendToOutgoingContext(ctx, "gray", gray)
	}
	r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if err != nil {
		return "", err
	}
	return r.GetServerId(), nil
}

func TestBalancer_DecisionTable(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod-1"}, nil)
	serve(t, reg, "svc", &testServer{name: "prod-2"}, map[string]string{"gray": "false"})
	grayInst := serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	c := dial(t, reg, "svc")
	prod := []string{"prod-1", "prod-2"}
	// Connections turn READY one by one; the table wants them all.
	for _, want := range []struct{ gray, name string }{{"false", "prod-1"}, {"false", "prod-2"}, {"true", "gray"}} {
		require.Eventually(t, func() bool { got, err := call(t, c, want.gray); return err == nil && got == want.name },
			5*time.Second, time.Millisecond, "%s never answered", want.name)
	}
	for _, tc := range []struct {
		gray string
		want []string
	}{
		{"-", prod}, {"", prod}, {"true", []string{"gray"}}, {"TRUE", []string{"gray"}}, {"True", []string{"gray"}},
		{"false", prod}, {"FALSE", prod}, {"junk", prod}, {" true", prod},
	} {
		seen := map[string]bool{}
		for i := 0; i < 8; i++ {
			got, err := call(t, c, tc.gray)
			require.NoError(t, err, "gray=%q", tc.gray)
			assert.Contains(t, tc.want, got, "gray=%q", tc.gray)
			seen[got] = true
		}
		assert.Len(t, seen, len(tc.want), "gray=%q reaches every instance of its kind", tc.gray)
	}

	// No gray instance: gray requests fall back to prod.
	require.NoError(t, reg.Deregister("svc", grayInst.Addr()))
	require.Eventually(t, func() bool {
		got, err := call(t, c, "true")
		return err == nil && strings.HasPrefix(got, "prod")
	}, 5*time.Second, 10*time.Millisecond)
}

func TestBalancer_ProdWithOnlyGrayIsUnavailable(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	c := dial(t, reg, "svc")
	got, err := call(t, c, "true")
	require.NoError(t, err)
	require.Equal(t, "gray", got)
	_, err = call(t, c, "false")
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, err.Error(), `"svc"`)
	assert.Contains(t, err.Error(), "prod request")
}

// While a kind's connection is still being made, its RPCs queue.
func TestBalancer_QueuesWhileKindIsConnecting(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	// A listener that accepts TCP but never answers the HTTP/2 handshake
	// keeps the gray connection CONNECTING.
	a := silentListener(t)
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", a.Port, map[string]string{"gray": "true"})))
	c := dial(t, reg, "svc")
	got, err := call(t, c, "false")
	require.NoError(t, err)
	require.Equal(t, "prod", got)
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "true"), 300*time.Millisecond)
	defer cancel()
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Error(t, err, "a gray request waits for the gray instance; it is not sent to prod")
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
}

func TestThreeHops_UnaryAndStream(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "backend", &testServer{name: "b-prod"}, nil)
	serve(t, reg, "backend", &testServer{name: "b-gray"}, map[string]string{"gray": "true"})
	next := dial(t, reg, "backend")
	serve(t, reg, "middle", &testServer{name: "m-prod", next: next}, nil)
	serve(t, reg, "middle", &testServer{name: "m-gray", next: next}, map[string]string{"gray": "true"})
	c := dial(t, reg, "middle")

	for _, tc := range []struct{ gray, want string }{{"true", "m-gray>b-gray"}, {"-", "m-prod>b-prod"}, {"junk", "m-prod>b-prod"}} {
		for i := 0; i < 4; i++ {
			got, err := call(t, c, tc.gray)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got, "unary, gray=%q", tc.gray)

			ctx := context.Background()
			if tc.gray != "-" {
				ctx = metadata.AppendToOutgoingContext(ctx, "gray", tc.gray)
			}
			st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			require.NoError(t, err)
			r, err := st.Recv()
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(r.GetPayload().GetBody()), "stream, gray=%q", tc.gray)
		}
	}
}

func TestBalancer_ChurnProdNeverReachesGray(t *testing.T) {
	{
		reg := graylb.NewRegistry()
		var grayServers, prodServers []*testServer
		var grayInsts, prodInsts []graylb.Instance
		for i := 0; i < 3; i++ {
			g := &testServer{name: fmt.Sprintf("gray-%d", i)}
			p := &testServer{name: fmt.Sprintf("prod-%d", i)}
			grayInsts = append(grayInsts, serve(t, reg, "svc", g, map[string]string{"gray": "true"}))
			prodInsts = append(prodInsts, serve(t, reg, "svc", p, nil))
			grayServers, prodServers = append(grayServers, g), append(prodServers, p)
		}
		c := dial(t, reg, "svc", graylb.WithCacheOptions(graylb.WithEmptyProtection(false)))
		var violations, calls, failures atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				gray := []string{"true", "false", "-", "TRUE"}[g]
				for {
					select {
					case <-stop:
						return
					default:
					}
					got, err := call(t, c, gray)
					calls.Add(1)
					if err != nil {
						failures.Add(1)
						continue
					}
					if (gray == "false" || gray == "-") && strings.HasPrefix(got, "gray") {
						violations.Add(1)
					}
				}
			}(g)
		}
		// Churn: take instances out and put them back, keeping one prod
		// instance, for 100 changes, each once the callers made 8 calls
		// over the one before.
		for i := 0; i < 100; i++ {
			want := calls.Load() + 8
			require.Eventually(t, func() bool { return calls.Load() >= want }, 10*time.Second, 100*time.Microsecond, "change %d: no calls", i)
			k := i % 3
			if i%2 == 0 {
				require.NoError(t, reg.Deregister("svc", grayInsts[k].Addr()))
				if k > 0 {
					require.NoError(t, reg.Deregister("svc", prodInsts[k].Addr()))
				}
			} else {
				require.NoError(t, reg.Register(grayInsts[k]))
				require.NoError(t, reg.Register(prodInsts[k]))
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("calls %d, failures %d, violations %d", calls.Load(), failures.Load(), violations.Load())
		require.Zero(t, violations.Load())
		require.Positive(t, calls.Load())
		var grayHits int64
		for _, s := range grayServers {
			grayHits += s.hits.Load()
		}
		assert.Positive(t, grayHits)
		_ = prodServers
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("inner", func(t *testing.T) {
		reg := graylb.NewRegistry()
		serve(t, reg, "svc", &testServer{name: "p"}, nil)
		c := dial(t, reg, "svc")
		for i := 0; i < 10; i++ {
			_, err := call(t, c, "-")
			require.NoError(t, err)
		}
	})
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+1 }, 5*time.Second, 20*time.Millisecond,
		"goroutines before %d, after %d", before, runtime.NumGoroutine())
}

func TestResolver_BadTarget(t *testing.T) {
	reg := graylb.NewRegistry()
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	conn, err := grpc.NewClient("graylb:///", append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = testgrpc.NewTestServiceClient(conn).UnaryCall(ctx, &testgrpc.SimpleRequest{})
		conn.Close()
	}
	require.Error(t, err)
	conn, err = grpc.NewClient("graylb:///unknown", append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = testgrpc.NewTestServiceClient(conn).UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unknown service")
	conn.Close()
}

// TestBalancer_FlipFollows flips an instance to gray while RPCs run:
// routing follows, and once gray requests reach it, prod requests do not.
func TestBalancer_FlipFollows(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	flip := serve(t, reg, "svc", &testServer{name: "flipper"}, nil)
	c := dial(t, reg, "svc")
	require.Eventually(t, func() bool { got, err := call(t, c, "false"); return err == nil && got == "flipper" }, 5*time.Second, 5*time.Millisecond)

	require.NoError(t, reg.SetMetadata("svc", flip.Addr(), "gray", "true"))
	require.Eventually(t, func() bool { got, err := call(t, c, "true"); return err == nil && got == "flipper" }, 5*time.Second, 5*time.Millisecond)
	for i := 0; i < 50; i++ {
		got, err := call(t, c, "false")
		require.NoError(t, err)
		require.Equal(t, "prod", got, "a prod RPC reached the flipped instance")
	}
	require.NoError(t, reg.SetMetadata("svc", flip.Addr(), "gray", "false"))
	require.Eventually(t, func() bool { got, err := call(t, c, "false"); return err == nil && got == "flipper" }, 5*time.Second, 5*time.Millisecond)
	got, err := call(t, c, "true")
	require.NoError(t, err)
	assert.Contains(t, []string{"prod", "flipper"}, got, "no gray instance left: gray falls back to prod")
}

func TestBalancer_HonoursWeightedPolicy(t *testing.T) {
	reg := graylb.NewRegistry()
	heavy := serve(t, reg, "svc", &testServer{name: "heavy"}, nil)
	serve(t, reg, "svc", &testServer{name: "light"}, nil)
	require.NoError(t, reg.Update("svc", heavy.Addr(), func(in *graylb.Instance) { in.Weight = 3 }))
	c := dial(t, reg, "svc", graylb.WithPolicy(policy.WeightedRoundRobin()))
	require.Eventually(t, func() bool { got, err := call(t, c, "-"); return err == nil && got == "light" }, 5*time.Second, 5*time.Millisecond)
	counts := map[string]int{}
	for i := 0; i < 400; i++ {
		got, err := call(t, c, "-")
		require.NoError(t, err)
		counts[got]++
	}
	assert.InDelta(t, 300, counts["heavy"], 45, "weight 3 of 4 gets about three quarters: %v", counts)
}

func TestResolver_PushesARealEmptyList(t *testing.T) {
	reg := graylb.NewRegistry()
	in := serve(t, reg, "svc", &testServer{name: "only"}, nil)
	protected := dial(t, reg, "svc")
	open := dial(t, reg, "svc", graylb.WithCacheOptions(graylb.WithEmptyProtection(false)))
	for _, c := range []testgrpc.TestServiceClient{protected, open} {
		got, err := call(t, c, "-")
		require.NoError(t, err)
		require.Equal(t, "only", got)
	}
	require.NoError(t, reg.Deregister("svc", in.Addr()))
	got, err := call(t, protected, "-")
	require.NoError(t, err, "protection keeps the last good list")
	assert.Equal(t, "only", got)
	require.Eventually(t, func() bool {
		_, err := call(t, open, "-")
		return status.Code(err) == codes.Unavailable
	}, 5*time.Second, 10*time.Millisecond, "without protection the empty list reaches the balancer")
}

// A connection that failed stays failed for the picker through its retries
// (IDLE, CONNECTING) until it is READY again, as grpc-go's round_robin
// sticks to TRANSIENT_FAILURE: RPCs keep failing fast instead of queueing
// during every retry.
func TestBalancer_FailedConnectionStaysFailedThroughRetries(t *testing.T) {
	reg := graylb.NewRegistry()
	// It accepts TCP and never answers the HTTP/2 handshake: each try
	// stays CONNECTING until the connect timeout, then fails.
	a := silentListener(t)
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", a.Port, nil)))
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	fast := grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1, MaxDelay: 50 * time.Millisecond}, MinConnectTimeout: time.Second})
	conn, err := grpc.NewClient("graylb:///svc", append(DialOptions(lb), fast, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	defer conn.Close()
	c := testgrpc.NewTestServiceClient(conn)
	callOnce := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return time.Since(start), err
	}
	require.Eventually(t, func() bool {
		d, err := callOnce()
		return status.Code(err) == codes.Unavailable && d < 100*time.Millisecond
	},
		10*time.Second, 10*time.Millisecond, "the first failure")
	// Each retry stays CONNECTING for 1 s: an RPC queued through one waits
	// most of it, far beyond what a loaded machine's scheduling adds to a
	// fast failure (a 150 ms bound failed 1 run in 20 under -race at load
	// 10 on two cores, before and after the change it guards).
	slow := 0
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); {
		d, err := callOnce()
		require.Equal(t, codes.Unavailable, status.Code(err))
		if d > 600*time.Millisecond {
			slow++ // queued through a retry instead of failing fast
		}
	}
	assert.Zero(t, slow, "RPCs queued while the failed connection retried")
}

// silentListener accepts TCP connections on loopback and never answers the
// HTTP/2 handshake; everything is closed when the test ends.
func silentListener(t *testing.T) *net.TCPAddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr)
}
