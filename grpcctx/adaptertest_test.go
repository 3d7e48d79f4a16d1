package grpcctx_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"github.com/graylb/graylb/grpcctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The conformance suite over grpcctx: servers are grpc-go servers with
// grpcctx.ServerOptions serving the interop TestService, clients
// connections to graylb:///<service> with grpcctx.DialOptions.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Driver{
		Name:    "grpcctx",
		Options: []graylb.Option{graylb.WithContextHandler(grpcctx.Handler())},
		Serve: func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o adaptertest.ServerOptions) {
			s := grpc.NewServer(grpcctx.ServerOptions(lb, serverOptions(o)...)...)
			testgrpc.RegisterTestServiceServer(s, &answering{o: o})
			go s.Serve(l)
			t.Cleanup(s.Stop)
		},
		Dial: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.Client {
			return dialClient(t, "graylb:///"+service, append(grpcctx.DialOptions(lb), grpc.WithDefaultServiceConfig(idempotent),
				grpc.WithDefaultCallOptions(grpcctx.Idempotent("/grpc.testing.TestService/UnaryCall")))...)
		},
		Stream: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.StreamClient {
			return streamClient(t, "graylb:///"+service, append(grpcctx.DialOptions(lb), grpc.WithDefaultServiceConfig(idempotent),
				grpc.WithDefaultCallOptions(grpcctx.Idempotent("/grpc.testing.TestService/StreamingOutputCall")))...)
		},
		Direct: func(t *testing.T, addr string) adaptertest.Client {
			return dialClient(t, "passthrough:///"+addr)
		},
		MaxAllocs: 4,
	})
}

// idempotent is the service config of a client whose methods are
// idempotent (docs/grpc.md): graylb's balancer, and UNAVAILABLE retried, so
// that an RPC sent to an instance as it dies is sent again (each attempt
// picks again). The suite's servers answer their server error with
// Internal, which is not retried.
const idempotent = `{"loadBalancingConfig":[{"graylb":{}}],"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],` +
	`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// serverOptions are grpcctx's options for o.
func serverOptions(o adaptertest.ServerOptions) []grpcctx.Option {
	var opts []grpcctx.Option
	if o.Trusted != nil {
		opts = append(opts, grpcctx.WithTrusted(func(ctx context.Context) bool { return o.Trusted(incoming(ctx)) }))
	}
	if o.User != nil {
		opts = append(opts, grpcctx.WithUser(func(ctx context.Context) string { return o.User(incoming(ctx)) }))
	}
	if len(o.Propagated) > 0 {
		opts = append(opts, grpcctx.WithPropagated(o.Propagated...))
	}
	return opts
}

// incoming reads the call's incoming metadata by name.
func incoming(ctx context.Context) func(string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return func(name string) string {
		if v := md.Get(name); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// answering answers UnaryCall with adaptertest.Respond, the Answer as the
// response's server id (a fault's code for a fault, Internal for another
// error).
type answering struct {
	testgrpc.UnimplementedTestServiceServer
	o adaptertest.ServerOptions
}

func (s *answering) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a, err := adaptertest.Respond(ctx, s.o, md)
	if f, ok := adaptertest.FaultOf(err); ok {
		return nil, status.Error(codes.Code(f.GRPCCode()), err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &testgrpc.SimpleResponse{ServerId: string(a.Encode())}, nil
}

// StreamingOutputCall answers with adaptertest.Respond: the Answer as its
// first message, then a second one as adaptertest.RestOf says.
func (s *answering) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	ctx := stream.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	a, err := adaptertest.Respond(ctx, s.o, md)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: a.Encode()}}); err != nil {
		return err
	}
	switch adaptertest.RestOf(s.o) {
	case adaptertest.RestLate:
		select {
		case <-time.After(adaptertest.RestDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	case adaptertest.RestStall:
		<-ctx.Done()
		return ctx.Err()
	case adaptertest.RestBreak:
		return status.Error(codes.Unavailable, "adaptertest: the answer breaks off")
	}
	return stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte("rest")}})
}

// streamClient connects to target and calls StreamingOutputCall, the keys
// as outgoing metadata: the Answer is the first message; whole reads the
// stream to its end, else the stream is cancelled.
func streamClient(t *testing.T, target string, opts ...grpc.DialOption) adaptertest.StreamClient {
	t.Helper()
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := testgrpc.NewTestServiceClient(conn)
	return func(ctx context.Context, keys map[string]string, whole bool) (adaptertest.Answer, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for k, v := range keys {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v)
		}
		st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			return adaptertest.Answer{}, err
		}
		m, err := st.Recv()
		if err != nil {
			return adaptertest.Answer{}, err
		}
		a, err := adaptertest.ParseAnswer(m.GetPayload().GetBody())
		if err != nil || !whole {
			return a, err // cancelled before its end
		}
		for {
			if _, err := st.Recv(); err == io.EOF {
				return a, nil
			} else if err != nil {
				return a, err
			}
		}
	}
}

// dialClient connects to target and calls UnaryCall, the keys as outgoing
// metadata.
func dialClient(t *testing.T, target string, opts ...grpc.DialOption) adaptertest.Client {
	t.Helper()
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := testgrpc.NewTestServiceClient(conn)
	return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
		for k, v := range keys {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v)
		}
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if err != nil {
			return adaptertest.Answer{}, err
		}
		return adaptertest.ParseAnswer([]byte(r.GetServerId()))
	}
}
