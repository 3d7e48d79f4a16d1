package grpcctx

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// retryMethodConfig is a user's retry policy for the test service.
const retryMethodConfig = `"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],"retryPolicy":{` +
	`"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.01s","backoffMultiplier":1,"retryableStatusCodes":["UNAVAILABLE"]}}]`

// dialAfter dials service with DialOptions(lb) followed by extra.
func dialAfter(t *testing.T, lb *graylb.LoadBalancer, service string, extra ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	opts := append(append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials())), extra...)
	conn, err := grpc.NewClient("graylb:///"+service, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// A grpc.WithDefaultServiceConfig given after DialOptions that selects
// another balancer (round robin would send about half of the prod calls
// to gray) is refused: no call reaches any instance, and each fails with
// an error that says what to do.
func TestDialOptions_LaterDefaultServiceConfigOfAnotherBalancerIsRefused(t *testing.T) {
	rr := `{"loadBalancingConfig":[{"round_robin":{}}],` + retryMethodConfig + `}`
	for name, extra := range map[string][]grpc.DialOption{
		"round_robin with retries": {grpc.WithDefaultServiceConfig(rr)},
		"pick_first policy":        {grpc.WithDefaultServiceConfig(`{"loadBalancingPolicy":"pick_first"}`)},
		// The resolver's service config is ignored: the refusal is the
		// resolver's build error, which a blocking dial returns (the
		// other balancer's RPCs fail with an error of its own).
		"resolvers' service configs disabled": {grpc.WithDefaultServiceConfig(rr), grpc.WithDisableServiceConfig()},
	} {
		disabled := len(extra) > 1
		t.Run(name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			prod, gray := &testServer{name: "prod"}, &testServer{name: "gray"}
			serve(t, reg, "svc", prod, nil)
			serve(t, reg, "svc", gray, map[string]string{"gray": "true"})
			lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
			require.NoError(t, err)
			t.Cleanup(func() { lb.Close() })
			c := dialAfter(t, lb, "svc", extra...)
			answered := map[string]int{}
			var last error
			for i := 0; i < 200; i++ {
				got, err := call(t, c, "false")
				if err != nil {
					last = err
					continue
				}
				answered[got]++
			}
			require.Zero(t, answered["gray"], "prod calls of 200 that reached gray (answers: %v)", answered)
			require.Empty(t, answered, "calls balanced by another balancer")
			assert.Equal(t, codes.Unavailable, status.Code(last), "%v", last)
			msg := status.Convert(last).Message()
			if disabled {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				//lint:ignore SA1019 a blocking dial, as zrpc's
				block := grpc.WithBlock()
				opts := append(append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()), block), extra...)
				//lint:ignore SA1019 a blocking dial, as zrpc's
				_, err := grpc.DialContext(ctx, "graylb:///svc", opts...)
				require.ErrorIs(t, err, ErrOtherBalancer)
				msg = err.Error()
			}
			for _, want := range []string{"grpcctx:", "WithDefaultServiceConfig", "after grpcctx.DialOptions", `"graylb"`} {
				assert.Contains(t, msg, want)
			}
			assert.Zero(t, gray.hits.Load()+prod.hits.Load(), "calls that reached an instance")
		})
	}
}

// retriedServer fails its first failures calls with Unavailable.
type retriedServer struct {
	testServer
	failures int64
}

func (s *retriedServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.hits.Add(1) <= s.failures {
		return nil, status.Error(codes.Unavailable, "not yet")
	}
	return &testgrpc.SimpleResponse{ServerId: s.name}, nil
}

// serveServer is serve for any TestServiceServer.
func serveServer(t testing.TB, reg *graylb.Registry, service string, srv testgrpc.TestServiceServer, md map[string]string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(ServerOptions(nil)...)
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	a := lis.Addr().(*net.TCPAddr)
	require.NoError(t, reg.Register(graylb.NewInstance(service, a.IP.String(), a.Port, md)))
}

// A user's default service config after DialOptions that selects graylb
// (as the retry policy's documentation says) keeps its retry policy, and
// graylb's balancer picks.
func TestDialOptions_LaterDefaultServiceConfigSelectingGraylbKeepsRetries(t *testing.T) {
	reg := graylb.NewRegistry()
	prod := &retriedServer{testServer: testServer{name: "prod"}, failures: 2}
	gray := &testServer{name: "gray"}
	serveServer(t, reg, "svc", prod, nil)
	serve(t, reg, "svc", gray, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	c := dialAfter(t, lb, "svc", grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"graylb":{}}],`+retryMethodConfig+`}`))
	got, err := call(t, c, "false")
	require.NoError(t, err, "the retry policy retried twice")
	assert.Equal(t, "prod", got)
	assert.EqualValues(t, 3, prod.hits.Load(), "attempts")
	for i := 0; i < 200; i++ {
		got, err := call(t, c, "false")
		require.NoError(t, err)
		require.Equal(t, "prod", got)
	}
	assert.Zero(t, gray.hits.Load())
	// A gray call still reaches gray: the balancer is graylb's.
	require.Eventually(t, func() bool { got, err := call(t, c, "true"); return err == nil && got == "gray" },
		5*time.Second, time.Millisecond)
}

// A service config placed before DialOptions is replaced by graylb's (the
// last default service config counts): graylb's balancer picks.
func TestDialOptions_EarlierDefaultServiceConfigIsReplaced(t *testing.T) {
	reg := graylb.NewRegistry()
	gray := &testServer{name: "gray"}
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	serve(t, reg, "svc", gray, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	opts := append([]grpc.DialOption{grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`)},
		append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	conn, err := grpc.NewClient("graylb:///svc", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := testgrpc.NewTestServiceClient(conn)
	var wrong atomic.Int64
	for i := 0; i < 200; i++ {
		got, err := call(t, c, "false")
		require.NoError(t, err)
		if got != "prod" {
			wrong.Add(1)
		}
	}
	assert.Zero(t, wrong.Load())
	assert.Zero(t, gray.hits.Load())
}

// A refused ClientConn stays refused through idleness: when it leaves idle
// mode (its resolver built again) its calls still fail with the refusal,
// and never reach an instance, rather than run under graylb's service
// config with the program's own dropped.
func TestDialOptions_RefusalOutlivesIdleness(t *testing.T) {
	reg := graylb.NewRegistry()
	prod, gray := &testServer{name: "prod"}, &testServer{name: "gray"}
	serve(t, reg, "svc", prod, nil)
	serve(t, reg, "svc", gray, map[string]string{"gray": "true"})
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	rr := `{"loadBalancingConfig":[{"round_robin":{}}],` + retryMethodConfig + `}`
	opts := append(append(DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials())),
		grpc.WithDefaultServiceConfig(rr), grpc.WithIdleTimeout(100*time.Millisecond))
	conn, err := grpc.NewClient("graylb:///svc", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := testgrpc.NewTestServiceClient(conn)
	for round := 0; round < 3; round++ {
		_, err := call(t, c, "false")
		require.Error(t, err, "round %d", round)
		assert.Contains(t, status.Convert(err).Message(), "grpcctx:", "round %d: %v", round, err)
		// Idle: the next call builds the resolver again.
		require.Eventually(t, func() bool { return conn.GetState() == connectivity.Idle }, 5*time.Second, time.Millisecond,
			"round %d: the ClientConn never went idle", round)
	}
	assert.Zero(t, gray.hits.Load()+prod.hits.Load(), "calls that reached an instance")
}
