// Command grpc runs client → middle → backend over gRPC with the graylb
// balancer and the propagation interceptors, on the in-memory registry:
// the gray key set by the client decides both hops.
//
//	go run ./examples/grpc
package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// server answers with its name, after its next hop's answer if it has one.
type server struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	next testgrpc.TestServiceClient
}

func (s *server) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	id := s.name
	if s.next != nil {
		r, err := s.next.UnaryCall(ctx, req) // the server's ctx: the gray key travels on
		if err != nil {
			return nil, err
		}
		id += " > " + r.GetServerId()
	}
	return &testgrpc.SimpleResponse{ServerId: id}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "grpc example:", err)
		os.Exit(1)
	}
}

func run() error {
	reg := graylb.NewRegistry()
	lb, err := graylb.New(reg, graylb.WithContextHandler(grpcctx.Handler()))
	if err != nil {
		return err
	}
	defer lb.Close()
	dial := func(service string) (testgrpc.TestServiceClient, func(), error) {
		conn, err := grpc.NewClient("nacos:///"+service,
			append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			return nil, nil, err
		}
		return testgrpc.NewTestServiceClient(conn), func() { conn.Close() }, nil
	}
	start := func(service, name string, gray bool, next testgrpc.TestServiceClient) (func(), error) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s := grpc.NewServer(grpcctx.ServerOptions()...)
		testgrpc.RegisterTestServiceServer(s, &server{name: name, next: next})
		go s.Serve(lis)
		md := map[string]string{"gray": fmt.Sprint(gray)}
		if err := reg.Register(graylb.NewInstance(service, "127.0.0.1", lis.Addr().(*net.TCPAddr).Port, md)); err != nil {
			s.Stop()
			return nil, err
		}
		return s.Stop, nil
	}
	for _, s := range []struct {
		name string
		gray bool
	}{{"backend-prod", false}, {"backend-gray", true}} {
		stop, err := start("backend", s.name, s.gray, nil)
		if err != nil {
			return err
		}
		defer stop()
	}
	backend, closeBackend, err := dial("backend")
	if err != nil {
		return err
	}
	defer closeBackend()
	for _, s := range []struct {
		name string
		gray bool
	}{{"middle-prod", false}, {"middle-gray", true}} {
		stop, err := start("middle", s.name, s.gray, backend)
		if err != nil {
			return err
		}
		defer stop()
	}
	middle, closeMiddle, err := dial("middle")
	if err != nil {
		return err
	}
	defer closeMiddle()

	for _, gray := range []string{"", "true", "false", "junk"} {
		ctx := context.Background()
		if gray != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "gray", gray)
		}
		r, err := middle.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if err != nil {
			return err
		}
		fmt.Printf("gray %-7q -> %s\n", gray, r.GetServerId())
	}
	return nil
}
