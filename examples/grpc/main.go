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
		conn, err := grpc.NewClient("graylb:///"+service,
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
		s := grpc.NewServer(grpcctx.ServerOptions(lb)...)
		testgrpc.RegisterTestServiceServer(s, &server{name: name, next: next})
		go s.Serve(lis)
		md := map[string]string{"gray": fmt.Sprint(gray)}
		if err := reg.Register(graylb.NewInstance(service, "127.0.0.1", lis.Addr().(*net.TCPAddr).Port, md)); err != nil {
			s.Stop()
			return nil, err
		}
		return s.Stop, nil
	}
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	// startPair runs a prod and a gray instance of service.
	startPair := func(service string, next testgrpc.TestServiceClient) error {
		for _, gray := range []bool{false, true} {
			name := service + map[bool]string{false: "-prod", true: "-gray"}[gray]
			stop, err := start(service, name, gray, next)
			if err != nil {
				return err
			}
			stops = append(stops, stop)
		}
		return nil
	}
	if err := startPair("backend", nil); err != nil {
		return err
	}
	backend, closeBackend, err := dial("backend")
	if err != nil {
		return err
	}
	defer closeBackend()
	if err := startPair("middle", backend); err != nil {
		return err
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
