package grpcctx_test

import (
	"context"
	"net"
	"testing"

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
			return dialClient(t, "graylb:///"+service, append(grpcctx.DialOptions(lb), grpc.WithDefaultServiceConfig(idempotent))...)
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
