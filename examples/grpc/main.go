// Command grpc runs front → middle → backend over gRPC with the graylb
// balancer and the propagation interceptors, on the in-memory registry:
// middle and backend each have a prod and a gray instance, and the gray
// key the caller sends to front decides both hops. It runs on fixed,
// flag-set ports until Ctrl-C, prints the grpcurl commands to try (every
// server registers reflection, so grpcurl needs no .proto), and serves
// graylb's debug page over HTTP.
//
//	go run ./grpc          # from examples/
//	go run ./grpc -once    # free ports, a few calls, exit
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/grpcctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
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
		// An arrow, not ">": grpcurl prints the answer as JSON, which
		// escapes "<", ">" and "&" (as \u003e).
		id += " → " + r.GetServerId()
	}
	return &testgrpc.SimpleResponse{ServerId: id}, nil
}

type config struct {
	front    string // listen address of the front server (the one to call)
	debug    string // listen address of the debug page
	basePort int    // middle-prod, middle-gray, backend-prod, backend-gray listen on basePort..basePort+3
	once     bool
}

func main() {
	var c config
	flag.StringVar(&c.front, "front", "127.0.0.1:9090", "front server listen address (call this one)")
	flag.StringVar(&c.debug, "debug", "127.0.0.1:9095", "debug page listen address")
	flag.IntVar(&c.basePort, "base-port", 9091, "first port of the four instances (middle prod/gray, backend prod/gray)")
	flag.BoolVar(&c.once, "once", false, "use free ports, make a few calls, check and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "grpc example:", err)
		os.Exit(1)
	}
}

// demo is the running example.
type demo struct {
	front   string // host:port
	debug   string // http://host:port/debug/graylb
	closers []func()
}

func (d *demo) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	if c.once {
		c.front, c.debug, c.basePort = "127.0.0.1:0", "127.0.0.1:0", 0
	}
	d, err := start(c)
	if err != nil {
		return err
	}
	defer d.close()
	if c.once {
		return check(ctx, d, out)
	}
	fmt.Fprintf(out, `front on %[1]s; debug page on %[2]s
Try it (Ctrl-C stops):
  grpcurl -plaintext %[1]s list
  grpcurl -plaintext %[1]s grpc.testing.TestService/UnaryCall                    # prod
  grpcurl -plaintext -H 'gray: true' %[1]s grpc.testing.TestService/UnaryCall    # gray
  curl %[2]s
`, d.front, d.debug)
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

func start(c config) (_ *demo, err error) {
	d := &demo{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	reg := graylb.NewRegistry()
	picks := debugpage.NewPickCounters()
	lb, err := graylb.New(reg, graylb.WithObserver(picks.Observe))
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { lb.Close() })
	dial := func(service string) (testgrpc.TestServiceClient, error) {
		conn, err := grpc.NewClient("graylb:///"+service,
			append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			return nil, err
		}
		d.closers = append(d.closers, func() { conn.Close() })
		return testgrpc.NewTestServiceClient(conn), nil
	}
	// serve runs a server named name on addr; it returns its port.
	serve := func(addr, name string, next testgrpc.TestServiceClient) (int, error) {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return 0, err
		}
		s := grpc.NewServer(grpcctx.ServerOptions(lb)...)
		testgrpc.RegisterTestServiceServer(s, &server{name: name, next: next})
		reflection.Register(s)
		go s.Serve(lis)
		d.closers = append(d.closers, s.Stop)
		return lis.Addr().(*net.TCPAddr).Port, nil
	}
	port := func(i int) string {
		if c.basePort == 0 {
			return "127.0.0.1:0"
		}
		return fmt.Sprintf("127.0.0.1:%d", c.basePort+i)
	}
	// startPair runs a prod and a gray instance of service and registers them.
	startPair := func(service string, first int, next testgrpc.TestServiceClient) error {
		for i, gray := range []bool{false, true} {
			name := strings.TrimSuffix(service, "-service") + map[bool]string{false: "-prod", true: "-gray"}[gray]
			p, err := serve(port(first+i), name, next)
			if err != nil {
				return err
			}
			if err := reg.Register(graylb.NewInstance(service, "127.0.0.1", p, map[string]string{"gray": fmt.Sprint(gray)})); err != nil {
				return err
			}
		}
		return nil
	}
	if err := startPair("backend-service", 2, nil); err != nil {
		return nil, err
	}
	backend, err := dial("backend-service")
	if err != nil {
		return nil, err
	}
	if err := startPair("middle-service", 0, backend); err != nil {
		return nil, err
	}
	middle, err := dial("middle-service")
	if err != nil {
		return nil, err
	}
	p, err := serve(c.front, "front", middle)
	if err != nil {
		return nil, err
	}
	d.front = fmt.Sprintf("127.0.0.1:%d", p)

	lis, err := net.Listen("tcp", c.debug)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/graylb", debugpage.Handler(lb, debugpage.WithPickCounters(picks)))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "debug page:", err)
		}
	}()
	d.closers = append(d.closers, func() { hs.Close() })
	d.debug = fmt.Sprintf("http://%s/debug/graylb", lis.Addr())
	return d, nil
}

// check calls front with each gray value and checks every hop's kind.
func check(ctx context.Context, d *demo, out io.Writer) error {
	conn, err := grpc.NewClient("passthrough:///"+d.front, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	front := testgrpc.NewTestServiceClient(conn)
	want := map[string]string{
		"":      "front → middle-prod → backend-prod",
		"true":  "front → middle-gray → backend-gray",
		"TRUE":  "front → middle-gray → backend-gray",
		"false": "front → middle-prod → backend-prod",
		"junk":  "front → middle-prod → backend-prod",
	}
	for _, gray := range []string{"", "true", "TRUE", "false", "junk"} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if gray != "" {
			cctx = metadata.AppendToOutgoingContext(cctx, "gray", gray)
		}
		r, err := front.UnaryCall(cctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "gray %-7q -> %s\n", gray, r.GetServerId())
		if r.GetServerId() != want[gray] {
			return fmt.Errorf("gray %q: served by %q, want %q", gray, r.GetServerId(), want[gray])
		}
	}
	return nil
}
