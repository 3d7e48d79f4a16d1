package grpcctx

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// breakingServer answers a server stream with one message, then goes on
// as end says: "stall" sends nothing more until the stream's context
// ends, "unavailable" fails it with Unavailable. A unary call gets its
// headers, then nothing until its context ends.
type breakingServer struct {
	testgrpc.UnimplementedTestServiceServer
	end string
}

func (s *breakingServer) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte("first")}}); err != nil {
		return err
	}
	if s.end == "unavailable" {
		return status.Error(codes.Unavailable, "lost mid-stream")
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

func (s *breakingServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := grpc.SendHeader(ctx, metadata.Pairs("x-answer", "soon")); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// serveBreaking serves srv as the only gray instance of svc and returns a
// client over a LoadBalancer that ejects after 3 failures in a row, with
// what its CallObserver was told and whether the instance was ejected.
func serveBreaking(t *testing.T, srv *breakingServer) (testgrpc.TestServiceClient, func() []bool, *atomic.Bool) {
	reg := graylb.NewRegistry()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	in := graylb.NewInstance("svc", "127.0.0.1", lis.Addr().(*net.TCPAddr).Port, map[string]string{"gray": "true"})
	require.NoError(t, reg.Register(in))
	var mu sync.Mutex
	var told []bool
	var ejected atomic.Bool
	c := dial(t, reg, "svc",
		graylb.WithCallObserver(func(_ string, _ graylb.Instance, _ graylb.Kind, ok bool, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, ok)
		}),
		graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 3, OnEjection: func(e graylb.Ejection) {
			if e.For > 0 && e.Addr == in.Addr() {
				ejected.Store(true)
			}
		}}))
	return c, func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), told...)
	}, &ejected
}

// grayCtx is a gray RPC's context, ending after d.
func grayCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", "true"), d)
}

// A server stream that sends a message and then nothing until its
// caller's deadline is a call its instance did not answer in time, as one
// that sent nothing: it counts against the instance, which is ejected.
// (Before, the message made grpc-go's own DeadlineExceeded read as the
// server's answer: the instance was told failed but never ejected.)
func TestPicker_StreamStalledAfterAMessageCountsAgainstInstance(t *testing.T) {
	c, told, ejected := serveBreaking(t, &breakingServer{end: "stall"})
	for i := 0; i < 3; i++ {
		ctx, cancel := grayCtx(200 * time.Millisecond)
		st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}, grpc.WaitForReady(true))
		require.NoError(t, err)
		m, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, "first", string(m.GetPayload().GetBody()))
		_, err = st.Recv()
		require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
		cancel()
	}
	waitFor(t, 5*time.Second, true, "3 stalled streams were not all told", func() bool { return len(told()) == 3 })
	assert.Equal(t, []bool{false, false, false}, told())
	waitFor(t, 5*time.Second, true, "3 streams stalled until their deadline did not eject their instance", ejected.Load)
}

// A unary RPC whose server sent its headers and then nothing until the
// caller's deadline counts against the instance, as a stalled stream does.
func TestPicker_HeadersThenNothingCountsAgainstInstance(t *testing.T) {
	c, told, ejected := serveBreaking(t, &breakingServer{})
	for i := 0; i < 3; i++ {
		ctx, cancel := grayCtx(200 * time.Millisecond)
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
		cancel()
	}
	waitFor(t, 5*time.Second, true, "3 stalled calls were not all told", func() bool { return len(told()) == 3 })
	assert.Equal(t, []bool{false, false, false}, told())
	waitFor(t, 5*time.Second, true, "3 calls whose server sent headers and then nothing did not eject their instance", ejected.Load)
}

// A server stream that fails with Unavailable after a message counts as a
// failure of its instance.
func TestPicker_StreamUnavailableMidStreamFails(t *testing.T) {
	c, told, ejected := serveBreaking(t, &breakingServer{end: "unavailable"})
	for i := 0; i < 3; i++ {
		ctx, cancel := grayCtx(5 * time.Second)
		st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}, grpc.WaitForReady(true))
		require.NoError(t, err)
		_, err = st.Recv()
		require.NoError(t, err)
		_, err = st.Recv()
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		cancel()
	}
	waitFor(t, 5*time.Second, true, "3 failed streams were not all told", func() bool { return len(told()) == 3 })
	assert.Equal(t, []bool{false, false, false}, told())
	waitFor(t, 5*time.Second, true, "3 streams failed mid-stream did not eject their instance", ejected.Load)
}

// A server stream read to its end is an answer, whose duration runs to its
// status.
func TestPicker_StreamEndsAtItsStatus(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	var took atomic.Int64
	c := dial(t, reg, "svc", graylb.WithCallObserver(func(_ string, _ graylb.Instance, _ graylb.Kind, ok bool, d time.Duration) {
		if ok {
			took.Store(int64(d))
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}, grpc.WaitForReady(true))
	require.NoError(t, err)
	_, err = st.Recv()
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // must sleep: the duration told must run to the status, past this pause
	assert.Zero(t, took.Load(), "a stream was told before its status")
	_, err = st.Recv()
	require.Equal(t, io.EOF, err)
	waitFor(t, 5*time.Second, true, "a stream read to its end was not told", func() bool { return took.Load() > 0 })
	assert.GreaterOrEqual(t, time.Duration(took.Load()), 100*time.Millisecond)
}
