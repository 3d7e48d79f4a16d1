package grpcctx_test

import (
	"context"
	"fmt"
	"net"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

type named struct {
	testgrpc.UnimplementedTestServiceServer
	name string
}

func (n named) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: n.name}, nil
}

// A gRPC client whose RPCs go to the instances of their kind: the target
// graylb:///user-service resolves through graylb, and the registered
// balancer runs the gray chain with each RPC's context.
func Example() {
	reg := graylb.NewRegistry()
	for _, s := range []struct {
		name string
		md   map[string]string
	}{{"prod", nil}, {"gray", map[string]string{"gray": "true"}}} {
		lis, _ := net.Listen("tcp", "127.0.0.1:0")
		srv := grpc.NewServer(grpcctx.ServerOptions(nil)...)
		testgrpc.RegisterTestServiceServer(srv, named{name: s.name})
		go srv.Serve(lis)
		defer srv.Stop()
		a := lis.Addr().(*net.TCPAddr)
		reg.Register(graylb.NewInstance("user-service", "127.0.0.1", a.Port, s.md))
	}

	lb, _ := graylb.New(reg, graylb.WithContextHandler(grpcctx.Handler()))
	defer lb.Close()
	conn, _ := grpc.NewClient("graylb:///user-service",
		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)

	for _, gray := range []string{"true", "false"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "gray", gray)
		r, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(gray, "->", r.GetServerId())
	}
	// Output:
	// true -> gray
	// false -> prod
}
