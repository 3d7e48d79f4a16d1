// Command gozero runs a go-zero rest edge → zrpc order-rpc → zrpc
// user-rpc chain routed by graylb on the in-memory registry: order-rpc and
// user-rpc each have a prod and a gray instance, every process has its own
// LoadBalancer, and the gray header a caller sends to the edge (or the
// canary, -canary) decides every hop.
//
//	go run .                  # from examples/gozero/: until Ctrl-C, prints the curl commands to try
//	go run . -once            # free ports, a few requests, exit
//	go run . -once -canary 50 # half of the requests with no gray header go gray, whole chains
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/zeromicro/go-zero/core/conf"
	"github.com/zeromicro/go-zero/core/logx"
	"github.com/zeromicro/go-zero/core/proc"
	"github.com/zeromicro/go-zero/core/service"
	"github.com/zeromicro/go-zero/rest"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
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
		r, err := s.next.UnaryCall(ctx, req) // the call's ctx: its kind travels on
		if err != nil {
			return nil, err
		}
		id += " → " + r.GetServerId()
	}
	return &testgrpc.SimpleResponse{ServerId: id}, nil
}

type config struct {
	edge     string  // the rest edge's listen address
	basePort int     // order-prod, order-gray, user-prod, user-gray listen on basePort..basePort+3 (0: free ports)
	canary   float64 // the canary percentage
	once     bool
}

func main() {
	var c config
	flag.StringVar(&c.edge, "edge", "127.0.0.1:8888", "the rest edge's listen address")
	flag.IntVar(&c.basePort, "base-port", 9081, "order-rpc and user-rpc instances listen on this port and the next three")
	flag.Float64Var(&c.canary, "canary", 0, "canary percentage: requests with no gray header that go gray")
	flag.BoolVar(&c.once, "once", false, "free ports, send a few requests, print the chains and exit")
	flag.Parse()
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(c config, out io.Writer) error {
	logx.Disable() // go-zero logs every request to stdout otherwise
	if c.once {
		c.basePort = 0
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		c.edge = addr
	}
	var started []<-chan struct{}
	defer func() {
		// go-zero's Stop only closes its logs: its servers stop on the
		// process's wrap-up (before go-zero v1.6.0) and shutdown
		// listeners. Each Start returns once every listener ran; waiting
		// for them keeps a later server's set-up (a new listener) from
		// racing with a Start that returns.
		proc.WrapUp()
		proc.Shutdown()
		for _, done := range started {
			<-done
		}
	}()
	edgeURL, err := start(c, &started)
	logx.Disable() // the servers' set-up set go-zero's logs up again
	if err != nil {
		return err
	}
	if c.once {
		client := &http.Client{Timeout: 5 * time.Second}
		defer client.CloseIdleConnections()
		for _, h := range []struct{ name, value string }{{"", ""}, {"gray", "true"}, {"gray", "false"}, {"gray", "true"}, {"", ""}} {
			chain, err := get(client, edgeURL, h.name, h.value)
			if err != nil {
				return err
			}
			label := "no gray header"
			if h.name != "" {
				label = h.name + ": " + h.value
			}
			fmt.Fprintf(out, "%-16s %s\n", label, chain)
		}
		return nil
	}
	fmt.Fprintf(out, "rest edge → order-rpc → user-rpc, each rpc with a prod and a gray instance (canary %v %%); try:\n", c.canary)
	fmt.Fprintf(out, "  curl %s\n  curl -H 'gray: true' %s\n", edgeURL, edgeURL)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

// start starts the chain and returns the edge's URL.
func start(c config, started *[]<-chan struct{}) (string, error) {
	reg := graylb.NewRegistry()
	rules := graylb.Rules{CanaryPercent: c.canary}
	port := c.basePort
	// instance starts one zrpc instance of service whose calls go to next.
	instance := func(service, name string, gray bool, next string) error {
		lb, err := graylb.New(reg, graylb.WithSelfGray(gray), graylb.WithRules(rules))
		if err != nil {
			return err
		}
		srv := &server{name: name}
		if next != "" {
			var cc zrpc.RpcClientConf
			if err := conf.FillDefault(&cc); err != nil {
				return err
			}
			cc.Target = gozero.Target(next)
			cli, err := zrpc.NewClient(cc, gozero.ClientOptions(lb)...)
			if err != nil {
				return err
			}
			srv.next = testgrpc.NewTestServiceClient(cli.Conn())
		}
		var sc zrpc.RpcServerConf
		if err := conf.FillDefault(&sc); err != nil {
			return err
		}
		quiet(&sc.ServiceConf, service)
		addr, err := listenAddr(&port)
		if err != nil {
			return err
		}
		sc.ListenOn = addr
		s, err := zrpc.NewServer(sc, func(g *grpc.Server) { testgrpc.RegisterTestServiceServer(g, srv) })
		if err != nil {
			return err
		}
		gozero.AddServerInterceptors(s, lb)
		if err := serve(addr, s.Start, started); err != nil {
			return err
		}
		host, p, _ := net.SplitHostPort(addr)
		pn, _ := strconv.Atoi(p)
		return reg.Register(graylb.NewInstance(service, host, pn, map[string]string{"gray": strconv.FormatBool(gray)}))
	}
	for _, in := range []struct {
		service, name string
		gray          bool
		next          string
	}{
		{"user-rpc", "user-prod", false, ""}, {"user-rpc", "user-gray", true, ""},
		{"order-rpc", "order-prod", false, "user-rpc"}, {"order-rpc", "order-gray", true, "user-rpc"},
	} {
		if err := instance(in.service, in.name, in.gray, in.next); err != nil {
			return "", fmt.Errorf("%s: %w", in.name, err)
		}
	}

	lb, err := graylb.New(reg, graylb.WithRules(rules))
	if err != nil {
		return "", err
	}
	var cc zrpc.RpcClientConf
	if err := conf.FillDefault(&cc); err != nil {
		return "", err
	}
	cc.Target = gozero.Target("order-rpc")
	cli, err := zrpc.NewClient(cc, gozero.ClientOptions(lb)...)
	if err != nil {
		return "", err
	}
	orders := testgrpc.NewTestServiceClient(cli.Conn())

	var rc rest.RestConf
	if err := conf.FillDefault(&rc); err != nil {
		return "", err
	}
	quiet(&rc.ServiceConf, "edge")
	host, p, err := net.SplitHostPort(c.edge)
	if err != nil {
		return "", err
	}
	rc.Host = host
	if rc.Port, err = strconv.Atoi(p); err != nil {
		return "", err
	}
	edge, err := rest.NewServer(rc)
	if err != nil {
		return "", err
	}
	edge.Use(gozero.Middleware(lb))
	edge.AddRoute(rest.Route{Method: http.MethodGet, Path: "/", Handler: func(w http.ResponseWriter, r *http.Request) {
		resp, err := orders.UnaryCall(r.Context(), &testgrpc.SimpleRequest{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, "edge → "+resp.GetServerId())
	}})
	if err := serve(c.edge, edge.Start, started); err != nil {
		return "", err
	}
	return "http://" + c.edge + "/", nil
}

// quiet turns off what a go-zero service starts beside its server (a
// dev server on port 6060, stat reports, logs).
func quiet(sc *service.ServiceConf, name string) {
	sc.Name = name
	sc.Mode = service.DevMode
	sc.Log.Level = "severe"
	sc.DevServer.Enabled = false
}

// listenAddr returns the next address of the fixed ports, or a free
// loopback port when *port is 0.
func listenAddr(port *int) (string, error) {
	if *port == 0 {
		return freeAddr()
	}
	*port++
	return "127.0.0.1:" + strconv.Itoa(*port-1), nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// serve runs a go-zero server's Start (which blocks, and panics when it
// cannot listen) until addr accepts connections, and adds to started a
// channel closed when Start returns.
func serve(addr string, startFn func(), started *[]<-chan struct{}) error {
	failed := make(chan error, 1)
	done := make(chan struct{})
	*started = append(*started, done)
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				failed <- fmt.Errorf("%v", r)
			}
		}()
		startFn()
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-failed:
			return fmt.Errorf("%s: %w", addr, err)
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			conn.Close()
			return nil
		}
	}
	return errors.New(addr + ": not listening after 10s")
}

func get(client *http.Client, url, name, value string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if name != "" {
		req.Header.Set(name, value)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
