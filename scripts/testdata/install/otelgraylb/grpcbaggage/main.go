// A user's program on grpcbaggage: a call that says gray only in W3C
// baggage reaches a service whose next call goes to the gray instance.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/otelgraylb/grpcbaggage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// server answers with its name, or with the answer of its next hop.
type server struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	next testgrpc.TestServiceClient
}

func (s *server) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.next == nil {
		return &testgrpc.SimpleResponse{ServerId: s.name}, nil
	}
	return s.next.UnaryCall(ctx, req)
}

func serve(s *server, opts ...grpc.ServerOption) (port int, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, s)
	go srv.Serve(lis)
	return lis.Addr().(*net.TCPAddr).Port, srv.Stop
}

func dial(target string, opts ...grpc.DialOption) (testgrpc.TestServiceClient, func() error) {
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		fail(err)
	}
	return testgrpc.NewTestServiceClient(conn), conn.Close
}

func main() {
	reg := graylb.NewRegistry()
	for _, kind := range []string{"prod", "gray"} {
		port, stop := serve(&server{name: kind})
		defer stop()
		if err := reg.Register(graylb.NewInstance("backend", "127.0.0.1", port,
			map[string]string{"gray": strconv.FormatBool(kind == "gray")})); err != nil {
			fail(err)
		}
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(grpcctx.Handler(), otelgraylb.Handler()))
	if err != nil {
		fail(err)
	}
	defer lb.Close()
	backend, closeBackend := dial("graylb:///backend", append(grpcctx.DialOptions(lb), grpcbaggage.DialOptions(lb)...)...)
	defer closeBackend()
	port, stop := serve(&server{next: backend}, append(grpcctx.ServerOptions(lb), grpcbaggage.ServerOptions(lb)...)...)
	defer stop()
	edge, closeEdge := dial(fmt.Sprintf("passthrough:///127.0.0.1:%d", port))
	defer closeEdge()

	for bag, want := range map[string]string{"gray=true": "gray", "gray=false": "prod"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), grpcbaggage.Key, bag)
		r, err := edge.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if err != nil {
			fail(err)
		}
		if r.GetServerId() != want {
			fail(fmt.Errorf("baggage %s went to %q, want %q", bag, r.GetServerId(), want))
		}
	}
	fmt.Println("grpcbaggage: gray in W3C baggage alone reached the gray instance")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
