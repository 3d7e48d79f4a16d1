package grpcctx

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// killableServer is a gRPC server that stops the way kill -9 stops a
// process: its listener closes and every connection is reset (RST), with
// no GOAWAY and nothing drained; the registry still lists it.
type killableServer struct {
	l      net.Listener
	s      *grpc.Server
	mu     sync.Mutex
	conns  []net.Conn
	killed bool // a connection accepted as kill ran is reset at once
}

// trackingListener hands every accepted connection to onAccept.
type trackingListener struct {
	net.Listener
	onAccept func(net.Conn)
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.onAccept(c)
	}
	return c, err
}

func serveKillable(t testing.TB, reg *graylb.Registry, service string, srv testgrpc.TestServiceServer, md map[string]string) *killableServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	k := &killableServer{l: l, s: grpc.NewServer(ServerOptions(nil)...)}
	testgrpc.RegisterTestServiceServer(k.s, srv)
	go k.s.Serve(trackingListener{l, func(c net.Conn) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.killed { // accepted just before the listener closed
			resetConn(c)
			return
		}
		k.conns = append(k.conns, c)
	}})
	t.Cleanup(k.s.Stop)
	a := l.Addr().(*net.TCPAddr)
	require.NoError(t, reg.Register(graylb.NewInstance(service, a.IP.String(), a.Port, md)))
	return k
}

func (k *killableServer) kill() {
	k.l.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killed = true
	for _, c := range k.conns {
		resetConn(c)
	}
}

// resetConn closes c with RST, as the kernel does for a killed process.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// rpcResult is one RPC of a load run.
type rpcResult struct {
	gray       bool
	stream     bool
	start, end time.Time
	id         string
	err        error
}

// abruptRun is the outcome of a load run through an abrupt stop.
type abruptRun struct {
	results []rpcResult
	killing time.Time // when the kill began
	killed  time.Time // when it was over
}

// runAbruptStop serves svc with two prod instances and one gray one, sends
// gray and prod RPCs (unary and streaming) from several goroutines through
// conn, kills the gray instance once it served 100 gray RPCs, and goes on
// until 400 gray unary RPCs started after the kill.
func runAbruptStop(t *testing.T, extra ...grpc.DialOption) abruptRun {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod-1"}, nil)
	serve(t, reg, "svc", &testServer{name: "prod-2"}, map[string]string{"gray": "false"})
	gray := serveKillable(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	conn, err := grpc.NewClient("graylb:///svc", append(append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials())), extra...)...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(); lb.Close() })
	c := testgrpc.NewTestServiceClient(conn)
	require.Eventually(t, func() bool { id, err := call(t, c, "true"); return err == nil && id == "gray" }, 10*time.Second, time.Millisecond)

	var mu sync.Mutex
	var run abruptRun
	var grayServed, grayAfterKill atomic.Int64
	var killedAt atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	worker := func(gray, stream bool) {
		defer wg.Done()
		v := "false"
		if gray {
			v = "true"
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			r := rpcResult{gray: gray, stream: stream, start: time.Now()}
			after := killedAt.Load() != 0
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", v), 10*time.Second)
			if stream {
				var st testgrpc.TestService_StreamingOutputCallClient
				if st, r.err = c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}); r.err == nil {
					var m *testgrpc.StreamingOutputCallResponse
					if m, r.err = st.Recv(); r.err == nil {
						r.id = string(m.GetPayload().GetBody())
					}
				}
			} else {
				var m *testgrpc.SimpleResponse
				if m, r.err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); r.err == nil {
					r.id = m.GetServerId()
				}
			}
			cancel()
			r.end = time.Now()
			if gray && !stream {
				if r.id == "gray" {
					grayServed.Add(1)
				}
				if after {
					grayAfterKill.Add(1)
				}
			}
			mu.Lock()
			run.results = append(run.results, r)
			mu.Unlock()
		}
	}
	for _, w := range []struct{ gray, stream bool }{{true, false}, {true, false}, {true, false}, {false, false}, {true, true}, {false, true}} {
		wg.Add(1)
		go worker(w.gray, w.stream)
	}
	waitFor := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		if !assert.Eventually(t, cond, d, time.Millisecond) {
			close(stop)
			wg.Wait()
			t.Fatalf("%s: not within %v", what, d)
		}
	}
	waitFor("100 gray RPCs served by the gray instance", 10*time.Second, func() bool { return grayServed.Load() >= 100 })
	run.killing = time.Now()
	gray.kill()
	run.killed = time.Now()
	killedAt.Store(run.killed.UnixNano())
	waitFor("400 gray RPCs after the kill", 30*time.Second, func() bool { return grayAfterKill.Load() >= 400 })
	close(stop)
	wg.Wait()
	return run
}

// abruptTally sums up the RPCs of one kind and form.
type abruptTally struct {
	sent, afterKill, failed, onGray, onProd int
	failedAfterFirstFailure                 int // failed RPCs started after the first failure returned
	// beforeKillAstray: RPCs answered before the kill began, by another
	// instance than their kind's or not at all (a gray RPC answered by
	// prod while the gray instance was alive, say).
	beforeKillAstray  int
	firstErr          error // the first failure
	fallback, slowest time.Duration
}

func (r abruptRun) tally(gray, stream bool) abruptTally {
	var tl abruptTally
	var list []rpcResult
	for _, x := range r.results {
		if x.gray == gray && x.stream == stream {
			list = append(list, x)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].end.Before(list[j].end) })
	var firstFailure time.Time
	for _, x := range list {
		tl.sent++
		after := !x.start.Before(r.killed)
		if x.end.Before(r.killing) && (x.err != nil || strings.HasPrefix(x.id, "gray") != gray) {
			tl.beforeKillAstray++
		}
		if after {
			tl.afterKill++
			tl.slowest = max(tl.slowest, x.end.Sub(x.start))
		}
		switch {
		case x.err != nil:
			tl.failed++
			if firstFailure.IsZero() {
				firstFailure, tl.firstErr = x.end, x.err
			} else if x.start.After(firstFailure) {
				tl.failedAfterFirstFailure++
			}
		case strings.HasPrefix(x.id, "gray"):
			tl.onGray++
		default:
			tl.onProd++
			if gray && after && tl.fallback == 0 {
				tl.fallback = x.end.Sub(r.killed)
			}
		}
	}
	return tl
}

func (tl abruptTally) String() string {
	return fmt.Sprintf("%d sent (%d after the kill), %d failed (%d started after the first failure), %d on gray, %d on prod, %d answered astray before the kill; first error: %v",
		tl.sent, tl.afterKill, tl.failed, tl.failedAfterFirstFailure, tl.onGray, tl.onProd, tl.beforeKillAstray, tl.firstErr)
}

// TestBalancer_AbruptStopOfOnlyGray: the only gray instance stops
// abruptly (listener closed, connections reset, no GOAWAY) while the
// registry still lists it, under a steady load of gray and prod RPCs,
// unary and streaming. Its connection is lost, then refused: it serves
// nobody, so gray RPCs fall back to prod's READY connections instead of
// failing; prod RPCs never reach gray. Only RPCs already sent to the
// instance when it died can fail (grpc-go cannot know whether it acted on
// them); every RPC that starts after the first failure succeeds.
func TestBalancer_AbruptStopOfOnlyGray(t *testing.T) {
	run := runAbruptStop(t)
	grayU, prodU, grayS, prodS := run.tally(true, false), run.tally(false, false), run.tally(true, true), run.tally(false, true)
	t.Logf("gray unary: %v", grayU)
	t.Logf("prod unary: %v", prodU)
	t.Logf("gray stream: %v", grayS)
	t.Logf("prod stream: %v", prodS)
	t.Logf("first gray unary RPC on prod %v after the kill; slowest gray unary RPC after it %v", grayU.fallback, grayU.slowest)
	for _, tl := range []abruptTally{grayU, prodU, grayS, prodS} {
		assert.Zero(t, tl.failedAfterFirstFailure, "an RPC that started after the first failure failed: %v", tl)
		// While the gray instance was alive, RPCs went to their kind's
		// instances and none failed: the fall-back after the kill is not
		// one that was there all along.
		assert.Zero(t, tl.beforeKillAstray, "RPCs answered before the kill by another kind or not at all: %v", tl)
		assert.LessOrEqual(t, tl.failed, 3, "more RPCs failed than were in flight: %v", tl)
	}
	assert.Zero(t, prodU.onGray+prodS.onGray, "prod RPCs reached the gray instance")
	assert.Zero(t, prodU.failed+prodS.failed, "prod RPCs failed: %v; %v", prodU, prodS)
	require.Positive(t, grayU.afterKill-grayU.failed, "gray RPCs after the kill were served")

	reliabilityFragment(t, "abrupt-stop-grpc", fmt.Sprintf(
		"| abrupt stop (listener closed, connections reset, no GOAWAY) of the only gray instance, still registered (gRPC balancer, unary and streaming under load, no outlier detection, no retry policy) | gray unary: %d RPCs, %d after the kill, %d failed (only RPCs in flight at the kill can), 0 started after the first failure; gray streams: %d, %d failed; prod: %d unary + %d streams, %d failed, %d on gray | first gray RPC served by prod %v after the kill; slowest gray RPC after it %v |\n",
		grayU.sent, grayU.afterKill, grayU.failed, grayS.sent, grayS.failed, prodU.sent, prodS.sent, prodU.failed+prodS.failed, prodU.onGray+prodS.onGray,
		grayU.fallback.Round(time.Microsecond), grayU.slowest.Round(time.Microsecond)))
}

// retryServiceConfig selects the graylb balancer and retries the test
// service's RPCs that fail with UNAVAILABLE: what a client whose methods
// are idempotent adds so that RPCs in flight on an instance that dies are
// sent again (each try picks again, so it falls back as any RPC does).
const retryServiceConfig = `{"loadBalancingConfig":[{"graylb":{}}],"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],` +
	`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// TestBalancer_AbruptStopWithRetryPolicy: with a retry policy for
// UNAVAILABLE (idempotent methods), not even the RPCs in flight at the kill
// fail.
func TestBalancer_AbruptStopWithRetryPolicy(t *testing.T) {
	run := runAbruptStop(t, grpc.WithDefaultServiceConfig(retryServiceConfig))
	grayU, prodU, grayS, prodS := run.tally(true, false), run.tally(false, false), run.tally(true, true), run.tally(false, true)
	t.Logf("gray unary: %v", grayU)
	t.Logf("prod unary: %v", prodU)
	t.Logf("gray stream: %v", grayS)
	t.Logf("prod stream: %v", prodS)
	assert.Zero(t, grayU.failed, "gray unary RPCs failed: %v", grayU)
	for _, tl := range []abruptTally{grayU, prodU, grayS, prodS} {
		assert.Zero(t, tl.beforeKillAstray, "RPCs answered before the kill by another kind or not at all: %v", tl)
	}
	assert.Zero(t, prodU.failed+prodS.failed)
	assert.Zero(t, prodU.onGray+prodS.onGray)
	// A stream whose response had begun is not retried by grpc-go; this
	// one fails only if the instance died between its headers and its
	// message.
	assert.LessOrEqual(t, grayS.failed, 1, "%v", grayS)
}

// A gray instance whose connection failed (refused) serves nobody: gray
// RPCs fall back to prod's READY connections, wait-for-ready ones too, and
// fast; prod RPCs never go to gray.
func TestBalancer_GrayWithFailedConnectionFallsBackToProd(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().(*net.TCPAddr)
	l.Close()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", dead.Port, map[string]string{"gray": "true"})))
	c := dial(t, reg, "svc")
	got, err := call(t, c, "false")
	require.NoError(t, err)
	require.Equal(t, "prod", got)

	// Once the gray connection has failed, a gray RPC goes to prod at once.
	require.EventuallyWithT(t, func(c2 *assert.CollectT) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "true"), 2*time.Second)
		defer cancel()
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if assert.NoError(c2, err) {
			assert.Equal(c2, "prod", r.GetServerId())
		}
	}, 10*time.Second, 10*time.Millisecond, "gray never fell back to prod")
	for _, wfr := range []bool{false, true} {
		for range 20 {
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "true"), 5*time.Second)
			r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(wfr))
			cancel()
			require.NoError(t, err, "wait-for-ready %v", wfr)
			require.Equal(t, "prod", r.GetServerId())
		}
	}
}

// A prod instance whose connection failed: prod RPCs follow grpc-go's
// convention (a non-wait-for-ready RPC fails at once with Unavailable and
// the connection error, a wait-for-ready RPC queues); they never go to the
// live gray instance.
func TestBalancer_ProdWithFailedConnectionsFailsFast(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().(*net.TCPAddr)
	l.Close()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", dead.Port, nil)))
	c := dial(t, reg, "svc")
	got, err := call(t, c, "true")
	require.NoError(t, err)
	require.Equal(t, "gray", got)

	var last error
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "false"), time.Second)
		defer cancel()
		start := time.Now()
		_, last = c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return status.Code(last) == codes.Unavailable && time.Since(start) < 500*time.Millisecond
	}, 10*time.Second, 10*time.Millisecond, "last: %v", last)
	assert.Contains(t, status.Convert(last).Message(), "prod instances")
	assert.Contains(t, status.Convert(last).Message(), "connection refused", "the connection error reaches the caller")

	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "false"), 300*time.Millisecond)
	defer cancel()
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	require.Error(t, err)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "a wait-for-ready prod RPC queues; it is not sent to gray")
}

// A gray instance that cycles its connections (MaxConnectionAge: GOAWAY,
// then a new connection) has not failed: while each new connection is made
// gray RPCs wait for it, as grpc-go queues while CONNECTING; none goes to
// prod, none fails.
func TestBalancer_GrayConnectionCycleStaysOnGray(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	gray := &testServer{name: "gray"}
	serveWith(t, reg, "svc", gray, map[string]string{"gray": "true"}, append(ServerOptions(nil),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 100 * time.Millisecond, MaxConnectionAgeGrace: 5 * time.Second})))
	c := dial(t, reg, "svc")
	require.Eventually(t, func() bool { id, err := call(t, c, "true"); return err == nil && id == "gray" }, 10*time.Second, time.Millisecond)
	var onGray, onProd, failed, prodOnGray atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(time.Second)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				v := "true"
				if w == 2 {
					v = "false"
				}
				id, err := call(t, c, v)
				switch {
				case err != nil:
					failed.Add(1)
				case v == "false" && id == "gray":
					prodOnGray.Add(1)
				case v == "true" && id == "gray":
					onGray.Add(1)
				case v == "true":
					onProd.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("gray RPCs through connection cycles every 100 ms: %d on gray, %d on prod; %d failed; %d prod on gray", onGray.Load(), onProd.Load(), failed.Load(), prodOnGray.Load())
	assert.Zero(t, failed.Load())
	assert.Zero(t, prodOnGray.Load())
	assert.Positive(t, onGray.Load())
	assert.Zero(t, onProd.Load(), "gray RPCs left a gray instance that only renewed its connection")
}
