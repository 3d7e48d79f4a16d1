package gozero_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/core/conf"
	"github.com/zeromicro/go-zero/core/logx"
	"github.com/zeromicro/go-zero/core/proc"
	"github.com/zeromicro/go-zero/core/service"
	"github.com/zeromicro/go-zero/rest"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// go-zero logs to stdout and starts agents (a dev server on port 6060,
// stat reports) unless told otherwise: the tests silence the logs and
// turn the agents off in every configuration they build.
func TestMain(m *testing.M) {
	logx.Disable()
	logx.DisableStat()
	os.Exit(m.Run())
}

// quiet turns off what a go-zero service starts beside its server.
func quiet(sc *service.ServiceConf, name string) {
	sc.Name = name
	sc.Mode = service.TestMode // no load shedding, no stat reports
	sc.Log.Mode = "console"
	sc.Log.Level = "severe"
	sc.DevServer.Enabled = false
}

// serverConf returns a zrpc server configuration with go-zero's defaults
// (what a user loading a configuration file gets), quiet.
func serverConf(t testing.TB, name, listen string) zrpc.RpcServerConf {
	t.Helper()
	var c zrpc.RpcServerConf
	require.NoError(t, conf.FillDefault(&c))
	quiet(&c.ServiceConf, name)
	c.ListenOn = listen
	return c
}

// clientConf returns a zrpc client configuration with go-zero's defaults
// (zrpc's p2c balancer, its breaker, timeout, tracing and duration
// interceptors) and target.
func clientConf(t testing.TB, target string) zrpc.RpcClientConf {
	t.Helper()
	var c zrpc.RpcClientConf
	require.NoError(t, conf.FillDefault(&c))
	c.Target = target
	return c
}

// freePort returns a loopback port nothing listens on at the moment (go-zero
// servers listen on a configured address and do not say which port :0
// gave them).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// waitListening waits until addr accepts connections or start reported an
// error.
// go-zero's Start blocks and signals nothing: addr is polled every 10 ms.
func waitListening(addr string, failed <-chan error) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-failed:
			return fmt.Errorf("server on %s did not start: %v", addr, err)
		case <-deadline:
			return fmt.Errorf("server on %s did not listen within 10s", addr)
		case <-tick.C:
		}
	}
}

// stopAll stops every go-zero server started so far: zrpc's and rest's
// Stop only close the logs; their servers stop on the process's wrap-up
// (before go-zero v1.6.0) and shutdown listeners, which proc.WrapUp
// and proc.Shutdown call (go-zero's way for tests). done are the Start
// goroutines, waited for so that none outlives its test: each Start returns
// once every listener ran, and a server set up meanwhile (a new listener)
// would race with that wait.
func stopAll(t testing.TB, done ...<-chan error) {
	proc.WrapUp()
	proc.Shutdown()
	for _, d := range done {
		select {
		case <-d:
		case <-time.After(10 * time.Second):
			t.Errorf("a go-zero server did not stop within 10s of proc.Shutdown")
		}
	}
}

// start runs start (a go-zero server's Start, which blocks and panics when
// it cannot listen) in a goroutine until addr listens; the returned channel
// is closed when Start returns.
func start(t testing.TB, addr string, run func()) <-chan error {
	t.Helper()
	failed := make(chan error, 1)
	done := make(chan error)
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				failed <- fmt.Errorf("%v", r)
			}
		}()
		run()
	}()
	require.NoError(t, waitListening(addr, failed))
	return done
}

// named answers UnaryCall with its name, after next's answer when next is
// set (a service that calls the next one with the context it serves).
type named struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	next func(ctx context.Context) (string, error)
}

func (n *named) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	id := n.name
	if n.next != nil {
		rest, err := n.next(ctx)
		if err != nil {
			return nil, err
		}
		id += "," + rest
	}
	return &testgrpc.SimpleResponse{ServerId: id}, nil
}

// zrpcServer starts a zrpc server serving srv at a free loopback port with
// configure run on it before Start (interceptors), registers it in reg as
// service (gray or prod) and returns its address.
func zrpcServer(t testing.TB, reg *graylb.Registry, service string, gray bool, srv testgrpc.TestServiceServer, configure func(*zrpc.RpcServer)) string {
	t.Helper()
	return zrpcServerWith(t, reg, service, gray, srv, nil, configure)
}

// zrpcServerWith is zrpcServer with conf changing the server's
// configuration first.
func zrpcServerWith(t testing.TB, reg *graylb.Registry, service string, gray bool, srv testgrpc.TestServiceServer, conf func(*zrpc.RpcServerConf), configure func(*zrpc.RpcServer)) string {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	c := serverConf(t, service, addr)
	if conf != nil {
		conf(&c)
	}
	s, err := zrpc.NewServer(c, func(g *grpc.Server) {
		testgrpc.RegisterTestServiceServer(g, srv)
	})
	require.NoError(t, err)
	logx.Disable() // the first server's SetUp set the logs up
	if configure != nil {
		configure(s)
	}
	done := start(t, addr, s.Start)
	t.Cleanup(func() { stopAll(t, done) })
	if reg != nil {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		require.NoError(t, reg.Register(graylb.NewInstance(service, host, p, map[string]string{"gray": strconv.FormatBool(gray)})))
	}
	return addr
}

// restServer starts a go-zero rest server with configure run on it (routes,
// middleware) and returns its base URL.
func restServer(t testing.TB, configure func(*rest.Server)) string {
	t.Helper()
	var c rest.RestConf
	require.NoError(t, conf.FillDefault(&c))
	quiet(&c.ServiceConf, "edge")
	c.Host, c.Port = "127.0.0.1", freePort(t)
	s, err := rest.NewServer(c)
	require.NoError(t, err)
	logx.Disable()
	configure(s)
	addr := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	done := start(t, addr, s.Start)
	t.Cleanup(func() { stopAll(t, done) })
	return "http://" + addr
}

// get sends GET url with the headers hdr (name, value pairs) and returns
// the answer's body; a status other than 200 is an error.
func get(client *http.Client, url string, hdr ...string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
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
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}
