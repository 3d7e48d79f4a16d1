package grpcctx

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// listenOn listens on addr, waiting for a port being released.
func listenOn(t testing.TB, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	var err error
	require.Eventually(t, func() bool { l, err = net.Listen("tcp", addr); return err == nil }, 5*time.Second, 10*time.Millisecond,
		"listening on %s (the port is being released)", addr)
	return l
}

// TestBalancer_OnlyProdInstanceRestartedServesAgain: the only prod
// instance, with outlier detection on (30 s ejection time), stops until
// its failures ejected it and the client's reconnect back-off reached its
// longest wait (five refused connections), and comes back on its address.
// Ejection does not keep it away: it serves again within 1 s of its
// return (DialOptions' reconnect back-off; grpc-go's default waited up to
// 1.6 s more before its next connection attempt), and no RPC fails from
// 2 s after its return.
func TestBalancer_OnlyProdInstanceRestartedServesAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 s")
	}
	reg := graylb.NewRegistry()
	l := listenOn(t, "127.0.0.1:0")
	addr := l.Addr().String()
	start := func(l net.Listener) *grpc.Server {
		s := grpc.NewServer(ServerOptions(nil)...)
		testgrpc.RegisterTestServiceServer(s, &testServer{name: "prod"})
		go s.Serve(l)
		return s
	}
	s := start(l)
	a := l.Addr().(*net.TCPAddr)
	require.NoError(t, reg.Register(graylb.NewInstance("svc", a.IP.String(), a.Port, nil)))
	serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	var mu sync.Mutex
	ejected := 0
	// Two failures in a row eject it: the RPCs in flight when it stops fail
	// on it (the picker fails later ones before picking, with no instance
	// to charge), and with eight callers at least two are in flight.
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 2, OnEjection: func(e graylb.Ejection) {
		mu.Lock()
		defer mu.Unlock()
		if e.For > 0 {
			ejected++
		}
	}}))
	require.NoError(t, err)
	// DialOptions' reconnect back-off, not a short one of the test's; the
	// dialer counts the connection attempts to the prod instance.
	var dials atomic.Int64
	dialer := grpc.WithContextDialer(func(ctx context.Context, to string) (net.Conn, error) {
		if to == addr {
			dials.Add(1)
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", to)
	})
	conn, err := grpc.NewClient("graylb:///svc", append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()), dialer)...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(); lb.Close() })
	c := testgrpc.NewTestServiceClient(conn)
	require.Eventually(t, func() bool { id, err := call(t, c, "false"); return err == nil && id == "prod" }, 5*time.Second, 10*time.Millisecond)

	type result struct {
		at  time.Time
		err error
	}
	var results []result
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "false"), time.Second)
				r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				cancel()
				if err == nil && r.GetServerId() != "prod" {
					t.Errorf("a prod RPC reached %s", r.GetServerId())
				}
				mu.Lock()
				results = append(results, result{time.Now(), err})
				mu.Unlock()
			}
		}()
	}
	// answered counts the RPCs that ended after since, and those of them
	// that succeeded.
	answered := func(since time.Time) (all, ok int) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.at.After(since) {
				all++
				if r.err == nil {
					ok++
				}
			}
		}
		return all, ok
	}
	require.Eventually(t, func() bool { _, ok := answered(time.Time{}); return ok >= 20 }, 10*time.Second, time.Millisecond,
		"the instance never served before it stopped")
	s.Stop()
	stopped := dials.Load()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return ejected > 0 }, 10*time.Second, time.Millisecond,
		"its failures while down never ejected it: the test proves nothing")
	// 100, 160, 256, 410 ms: the fifth refused connection is followed by
	// the longest wait, 500 ms.
	require.Eventually(t, func() bool { return dials.Load() >= stopped+5 }, 10*time.Second, time.Millisecond,
		"the client stopped reconnecting")
	back := time.Now()
	s = start(listenOn(t, addr))
	defer s.Stop()
	// The RPCs from 2 s after its return, which must all succeed.
	require.Eventually(t, func() bool { all, _ := answered(back.Add(2 * time.Second)); return all >= 500 }, 30*time.Second, 10*time.Millisecond,
		"500 RPCs from 2 s after its return")
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, ejected, "its failures while down never ejected it: the test proves nothing")
	var firstOK time.Time
	var late, lateFailed int
	for _, r := range results {
		if r.at.After(back) && r.err == nil && (firstOK.IsZero() || r.at.Before(firstOK)) {
			firstOK = r.at
		}
		if r.at.After(back.Add(2 * time.Second)) {
			late++
			if r.err != nil {
				lateFailed++
			}
		}
	}
	require.False(t, firstOK.IsZero(), "it never served again")
	t.Logf("first success %v after its return; from 2 s after: %d of %d failed", firstOK.Sub(back), lateFailed, late)
	require.LessOrEqual(t, firstOK.Sub(back), time.Second, "it served again only after 1 s")
	require.Zero(t, lateFailed)
	require.Greater(t, late, 100)
}
