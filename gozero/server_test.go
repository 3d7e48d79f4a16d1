package gozero_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// The rest middleware admits the routing headers: a zrpc call the handler
// makes with its context (through graylb's client interceptor) carries
// them, but not those gRPC metadata cannot carry, none of an untrusted
// caller's, and no other header.
func TestMiddlewareCarriesKeptHeadersToGRPC(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	require.NoError(t, err)
	defer lb.Close()
	var got metadata.MD
	call := grpcctx.UnaryClientInterceptor(lb)
	sent := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		got, _ = metadata.FromOutgoingContext(ctx)
		return nil
	}
	h := func(w http.ResponseWriter, r *http.Request) { _ = call(r.Context(), "/m", nil, nil, nil, sent) }
	trusted := httpctx.WithTrusted(func(r *http.Request) bool { return r.Header.Get("X-Internal-Token") == "s3cret" })
	serve := gozero.Middleware(lb, trusted, httpctx.WithPropagated("X-Lane", "X!Odd", "Grpc-Timeout"))(h)

	for _, tc := range []struct {
		name string
		hdr  http.Header
		want metadata.MD
	}{
		{"trusted", http.Header{"X-Internal-Token": {"s3cret"}, "Gray": {"true"}, "Uid": {"alice"}, "Version": {"v2"}, "Other": {"x"}},
			metadata.MD{"gray": {"true"}, "uid": {"alice"}, "version": {"v2"}}},
		{"propagated", http.Header{"X-Internal-Token": {"s3cret"}, "X-Lane": {"blue"}}, metadata.MD{"x-lane": {"blue"}}},
		{"not carried by gRPC", http.Header{"X-Internal-Token": {"s3cret"}, "Gray": {"true"}, "Uid": {"é"}, "Version": {"v1\tv2"}, "X!odd": {"1"}, "Grpc-Timeout": {"1S"}},
			metadata.MD{"gray": {"true"}}},
		{"trusted, no routing header", http.Header{"X-Internal-Token": {"s3cret"}, "Other": {"x"}}, nil},
		// An untrusted caller's side is settled at the edge: prod, written.
		{"untrusted", http.Header{"Gray": {"true"}, "GRAY": {"true"}, "uid": {"alice"}}, metadata.MD{"gray": {"false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header = tc.hdr
			serve(httptest.NewRecorder(), r)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The rest middleware also writes the request's routing state on the
// context's outgoing gRPC metadata, so that a zrpc client made without
// graylb's options (etcd discovery) carries it to the next hop too; none
// of an untrusted caller's keys, and no other header.
func TestMiddlewarePutsAdmittedHeadersOnOutgoingMetadata(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	require.NoError(t, err)
	defer lb.Close()
	var got metadata.MD
	h := func(w http.ResponseWriter, r *http.Request) { got, _ = metadata.FromOutgoingContext(r.Context()) }
	trusted := httpctx.WithTrusted(func(r *http.Request) bool { return r.Header.Get("X-Internal-Token") == "s3cret" })
	serve := gozero.Middleware(lb, trusted, httpctx.WithPropagated("X-Lane", "X!Odd", "Grpc-Timeout"))(h)

	for _, tc := range []struct {
		name string
		hdr  http.Header
		want metadata.MD
	}{
		{"trusted", http.Header{"X-Internal-Token": {"s3cret"}, "Gray": {"true"}, "Uid": {"alice"}, "Version": {"v2"}, "Other": {"x"}},
			metadata.MD{"gray": {"true"}, "uid": {"alice"}, "version": {"v2"}}},
		{"propagated", http.Header{"X-Internal-Token": {"s3cret"}, "X-Lane": {"blue"}}, metadata.MD{"x-lane": {"blue"}}},
		{"not carried by gRPC", http.Header{"X-Internal-Token": {"s3cret"}, "Gray": {"true"}, "Uid": {"é"}, "Version": {"v1\tv2"}, "X!odd": {"1"}, "Grpc-Timeout": {"1S"}},
			metadata.MD{"gray": {"true"}}},
		{"trusted, no routing header", http.Header{"X-Internal-Token": {"s3cret"}, "Other": {"x"}}, nil},
		// None of an untrusted caller's keys; its side settled: prod, written.
		{"untrusted", http.Header{"Gray": {"true"}, "GRAY": {"true"}, "uid": {"alice"}}, metadata.MD{"gray": {"false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header = tc.hdr
			serve(httptest.NewRecorder(), r)
			assert.Equal(t, tc.want, got)
		})
	}
}

// streamer answers StreamingOutputCall with one message: its name and the
// answer of the next service, called with the stream's context.
type streamer struct {
	named
}

func (s *streamer) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, st testgrpc.TestService_StreamingOutputCallServer) error {
	r, err := s.UnaryCall(st.Context(), nil)
	if err != nil {
		return err
	}
	return st.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(r.GetServerId())}})
}

// A streaming call keeps its kind on the next hop: the stream server
// interceptor AddServerInterceptors adds keeps the incoming metadata.
func TestStreamKeepsKind(t *testing.T) {
	reg := graylb.NewRegistry()
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	for _, gray := range []bool{false, true} {
		zrpcServer(t, reg, "svc-b", gray, &named{name: "b-" + kindName(gray)}, nil)
	}
	b := zrpcClient(t, lb, "svc-b")
	for _, gray := range []bool{false, true} {
		a := &streamer{named{name: "a-" + kindName(gray), next: func(ctx context.Context) (string, error) {
			r, err := b.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			return r.GetServerId(), err
		}}}
		zrpcServer(t, reg, "svc-a", gray, a, func(s *zrpc.RpcServer) { gozero.AddServerInterceptors(s, lb) })
	}
	a := zrpcClient(t, lb, "svc-a")
	for md, want := range map[string]string{"true": "a-gray,b-gray", "false": "a-prod,b-prod"} {
		for i := 0; i < 20; i++ {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "gray", md)
			st, err := a.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			require.NoError(t, err)
			m, err := st.Recv()
			require.NoError(t, err)
			assert.Equal(t, want, string(m.GetPayload().GetBody()), "gray: %s", md)
		}
	}
}
