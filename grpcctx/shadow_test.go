package grpcctx

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/shadow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// userServer answers UnaryCall with its user name, counting calls and
// those marked shadow.
type userServer struct {
	testgrpc.UnimplementedTestServiceServer
	user            string
	calls, shadowed atomic.Int64
}

func (s *userServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.calls.Add(1)
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(adapter.ShadowKey)) > 0 {
		s.shadowed.Add(1)
	}
	return &testgrpc.SimpleResponse{Username: s.user}, nil
}

const unaryCall = "/grpc.testing.TestService/UnaryCall"

// Unary calls of a method marked idempotent are mirrored to the gray
// build under the shadow mark and compared as JSON; the caller gets prod's
// reply. A shadow copy's call of a method not marked idempotent is refused
// with an error wrapping shadow.ErrWrite and reaches no instance.
func TestShadow_MirrorsIdempotentUnaryCalls(t *testing.T) {
	for _, tc := range []struct {
		grayUser string
		want     shadow.Outcome
	}{{"alice", shadow.Same}, {"mallory", shadow.Differs}} {
		t.Run(tc.grayUser, func(t *testing.T) {
			reg := graylb.NewRegistry()
			prod, gray := &userServer{user: "alice"}, &userServer{user: tc.grayUser}
			for _, s := range []struct {
				srv *userServer
				md  map[string]string
			}{{prod, nil}, {gray, map[string]string{"gray": "true"}}} {
				port := serveRaw(t, s.srv, ServerOptions(nil))
				require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, s.md)))
			}
			evs := make(chan shadow.Event, 64)
			lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(func(e shadow.Event) { evs <- e }))
			require.NoError(t, err)
			defer lb.Close()
			conn, err := grpc.NewClient("graylb:///svc", append(DialOptions(lb, WithMirror(shadow.WithNoiseSample(0))),
				grpc.WithDefaultCallOptions(Idempotent(unaryCall)), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			require.NoError(t, err)
			defer conn.Close()
			c := testgrpc.NewTestServiceClient(conn)
			r, err := c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			require.NoError(t, err)
			assert.Equal(t, "alice", r.GetUsername(), "the copy's reply is never returned")
			select {
			case e := <-evs:
				assert.Equal(t, tc.want, e.Outcome)
				assert.Equal(t, unaryCall, e.Route)
				if tc.want == shadow.Differs {
					assert.Equal(t, []string{"username"}, e.Paths)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no shadow event")
			}
			assert.EqualValues(t, 1, gray.calls.Load())
			assert.EqualValues(t, 1, gray.shadowed.Load())
			assert.EqualValues(t, 1, prod.calls.Load())
			assert.Zero(t, prod.shadowed.Load())
		})
	}
}

func TestShadow_RefusesWritesOverGRPC(t *testing.T) {
	reg := graylb.NewRegistry()
	prod, gray := &userServer{user: "p"}, &userServer{user: "g"}
	for _, s := range []struct {
		srv *userServer
		md  map[string]string
	}{{prod, nil}, {gray, map[string]string{"gray": "true"}}} {
		port := serveRaw(t, s.srv, ServerOptions(nil))
		require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, s.md)))
	}
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	dial := func(opts ...grpc.DialOption) testgrpc.TestServiceClient {
		conn, err := grpc.NewClient("graylb:///svc", append(append(DialOptions(lb), opts...), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return testgrpc.NewTestServiceClient(conn)
	}
	ctx, cancel := context.WithTimeout(adapter.ShadowCopy(context.Background()), 5*time.Second)
	defer cancel()
	_, err = dial().UnaryCall(ctx, &testgrpc.SimpleRequest{})
	assert.ErrorIs(t, err, shadow.ErrWrite)
	r, err := dial(grpc.WithDefaultCallOptions(Idempotent(unaryCall))).UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	assert.Equal(t, "g", r.GetUsername(), "a shadow copy goes to gray only")
	assert.Zero(t, prod.calls.Load())
	r, err = dial().UnaryCall(shadow.AllowWrites(ctx), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	assert.Equal(t, "g", r.GetUsername())
}

// copyServer records, of each call, whether its server side admitted it as
// a copy (shadow.Is) and as a shadow copy (to gray only).
type copyServer struct {
	testgrpc.UnimplementedTestServiceServer
	calls, copies, shadows atomic.Int64
}

func (s *copyServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.calls.Add(1)
	if shadow.Is(ctx) {
		s.copies.Add(1)
	}
	if adapter.Shadowed(ctx) {
		s.shadows.Add(1)
	}
	return &testgrpc.SimpleResponse{Username: "u"}, nil
}

// The noise sample (the call sent to prod again) carries the sample mark:
// the prod server admits it as a copy, whose writes its calls refuse, but
// not as a shadow copy (it routes as prod).
func TestShadow_NoiseSampleMarkedOverGRPC(t *testing.T) {
	reg := graylb.NewRegistry()
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}))
	require.NoError(t, err)
	defer lb.Close()
	prod, gray := &copyServer{}, &copyServer{}
	for _, s := range []struct {
		srv *copyServer
		md  map[string]string
	}{{prod, nil}, {gray, map[string]string{"gray": "true"}}} {
		port := serveRaw(t, s.srv, ServerOptions(lb))
		require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", port, s.md)))
	}
	conn, err := grpc.NewClient("graylb:///svc", append(DialOptions(lb, WithMirror(shadow.WithNoiseSample(1))),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(Idempotent(unaryCall)))...)
	require.NoError(t, err)
	defer conn.Close()
	_, err = testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for prod.calls.Load() < 2 || gray.calls.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("prod %d calls, gray %d", prod.calls.Load(), gray.calls.Load())
		}
		time.Sleep(10 * time.Millisecond) // polled with a deadline: the copies go out beside the call
	}
	assert.EqualValues(t, 1, prod.copies.Load(), "the sample, admitted as a copy")
	assert.Zero(t, prod.shadows.Load())
	assert.EqualValues(t, 1, gray.copies.Load())
	assert.EqualValues(t, 1, gray.shadows.Load())
}
