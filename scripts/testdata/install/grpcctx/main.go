// A user's program on grpcctx: RPCs to graylb:///user-service reach the
// instance of their kind.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

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

func main() {
	reg := graylb.NewRegistry()
	for _, kind := range []string{"prod", "gray"} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		srv := grpc.NewServer(grpcctx.ServerOptions(nil)...)
		testgrpc.RegisterTestServiceServer(srv, named{name: kind})
		go srv.Serve(lis)
		defer srv.Stop()
		if err := reg.Register(graylb.NewInstance("user-service", "127.0.0.1", lis.Addr().(*net.TCPAddr).Port,
			map[string]string{"gray": strconv.FormatBool(kind == "gray")})); err != nil {
			fail(err)
		}
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(grpcctx.Handler()))
	if err != nil {
		fail(err)
	}
	defer lb.Close()
	conn, err := grpc.NewClient("graylb:///user-service",
		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	for gray, want := range map[string]string{"true": "gray", "false": "prod"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "gray", gray)
		r, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if err != nil {
			fail(err)
		}
		if r.GetServerId() != want {
			fail(fmt.Errorf("gray: %s went to %q, want %q", gray, r.GetServerId(), want))
		}
	}
	fmt.Println("grpcctx: a gray and a prod RPC each reached their kind")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
