package matrixtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2/transport"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	graylbkratos "github.com/graylb/graylb/kratos"
	"github.com/zeromicro/go-zero/core/conf"
	"github.com/zeromicro/go-zero/core/logx"
	"github.com/zeromicro/go-zero/core/proc"
	"github.com/zeromicro/go-zero/core/service"
	"github.com/zeromicro/go-zero/rest"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// A server adapter: the server side of a service instance.
type serverKind int

const (
	srvHTTPCtx    serverKind = iota // net/http with httpctx.Middleware
	srvGRPCCtx                      // grpc-go with grpcctx.ServerOptions
	srvKratosHTTP                   // Kratos HTTP server with graylbkratos.Server
	srvKratosGRPC                   // Kratos gRPC server with graylbkratos.Server
	srvRest                         // go-zero rest with gozero.Middleware
	srvZrpc                         // go-zero zrpc with gozero.AddServerInterceptors
	srvKafka                        // a Kafka consumer with kafkagray (records_test.go)
)

func (k serverKind) String() string {
	return [...]string{"httpctx", "grpcctx", "kratoshttp", "kratosgrpc", "rest", "zrpc", "kafka"}[k]
}

// overHTTP reports whether the server speaks HTTP (else gRPC).
func (k serverKind) overHTTP() bool { return k == srvHTTPCtx || k == srvKratosHTTP || k == srvRest }

// A client adapter: how a service calls the next one.
type clientKind int

const (
	cliHTTPCtx    clientKind = iota // net/http with httpctx.NewTransport, http://<service>/
	cliGRPCCtx                      // grpc-go with grpcctx.DialOptions, graylb:///<service>
	cliKratosHTTP                   // Kratos HTTP client, graylbkratos.Client, graylb's selector
	cliKratosGRPC                   // Kratos gRPC client, graylbkratos.Client, graylb's selector
	cliZrpc                         // go-zero zrpc client, gozero.NewClient
	cliKafka                        // a Kafka producer with kafkagray (records_test.go)
)

func (k clientKind) String() string {
	return [...]string{"httpctx Transport", "grpcctx", "kratos http client", "kratos grpc client", "zrpc client", "kafkagray record"}[k]
}

// The trust boundary: a caller is trusted when it sends internalHeader:
// internalToken (the edge's trusted requests do; the untrusted caller does
// not). Only A's server side checks it.
const (
	internalHeader = "x-internal"
	internalToken  = "s3cret"
)

// answer is the body every HTTP instance answers.
type answer struct {
	Chain string `json:"chain"`
}

// handlerFunc answers a request: the chain from this hop on, computed with
// the request's own context.
type handlerFunc func(ctx context.Context) (string, error)

// echo is the gRPC service every gRPC instance serves: UnaryCall answers
// the chain in ServerId.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
	fn handlerFunc
}

func (e *echo) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s, err := e.fn(ctx)
	if err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{ServerId: s}, nil
}

// httpHandler answers GET /call with the chain as JSON.
func httpHandler(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := fn(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer{Chain: s})
	})
}

// serve starts one instance over the server adapter k, its server side
// with lb's keys, a trust boundary when boundary is set, and returns its
// address. Every server is stopped when the test ends.
func serve(t *testing.T, k serverKind, lb *graylb.LoadBalancer, boundary bool, fn handlerFunc) string {
	t.Helper()
	switch k {
	case srvHTTPCtx:
		var opts []httpctx.MiddlewareOption
		if boundary {
			opts = append(opts, httpctx.WithTrusted(trustedHTTP))
		}
		mux := http.NewServeMux()
		mux.Handle("GET /call", httpHandler(fn))
		l := listen(t)
		srv := &http.Server{Handler: httpctx.Middleware(lb, opts...)(mux)}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return l.Addr().String()
	case srvGRPCCtx:
		var opts []grpcctx.Option
		if boundary {
			opts = append(opts, grpcctx.WithTrusted(trustedGRPC))
		}
		l := listen(t)
		s := grpc.NewServer(grpcctx.ServerOptions(lb, opts...)...)
		testgrpc.RegisterTestServiceServer(s, &echo{fn: fn})
		go s.Serve(l)
		t.Cleanup(s.Stop)
		return l.Addr().String()
	case srvKratosHTTP, srvKratosGRPC:
		var opts []graylbkratos.Option
		if boundary {
			opts = append(opts, graylbkratos.WithTrusted(trustedKratos))
		}
		mw := graylbkratos.Server(lb, opts...)
		if k == srvKratosHTTP {
			srv := khttp.NewServer(khttp.Address("127.0.0.1:0"), khttp.Middleware(mw))
			srv.Route("/").GET("/call", func(c khttp.Context) error {
				h := c.Middleware(func(ctx context.Context, _ interface{}) (interface{}, error) {
					s, err := fn(ctx)
					return answer{Chain: s}, err
				})
				out, err := h(c, nil)
				if err != nil {
					return err
				}
				return c.Result(200, out)
			})
			return runKratos(t, srv.Endpoint, srv.Start, srv.Stop)
		}
		srv := kgrpc.NewServer(kgrpc.Address("127.0.0.1:0"), kgrpc.Middleware(mw))
		testgrpc.RegisterTestServiceServer(srv, &echo{fn: fn})
		return runKratos(t, srv.Endpoint, srv.Start, srv.Stop)
	case srvRest:
		var opts []httpctx.MiddlewareOption
		if boundary {
			opts = append(opts, httpctx.WithTrusted(trustedHTTP))
		}
		var c rest.RestConf
		if err := conf.FillDefault(&c); err != nil {
			t.Fatal(err)
		}
		quiet(&c.ServiceConf)
		c.Host, c.Port = "127.0.0.1", freePort(t)
		s, err := rest.NewServer(c)
		if err != nil {
			t.Fatal(err)
		}
		logx.Disable() // the first server's SetUp set the logs up
		s.Use(gozero.Middleware(lb, opts...))
		s.AddRoute(rest.Route{Method: http.MethodGet, Path: "/call", Handler: httpHandler(fn).ServeHTTP})
		addr := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
		runGoZero(t, addr, s.Start)
		return addr
	case srvZrpc:
		var opts []grpcctx.Option
		if boundary {
			opts = append(opts, grpcctx.WithTrusted(trustedGRPC))
		}
		var c zrpc.RpcServerConf
		if err := conf.FillDefault(&c); err != nil {
			t.Fatal(err)
		}
		quiet(&c.ServiceConf)
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		c.ListenOn = addr
		s, err := zrpc.NewServer(c, func(g *grpc.Server) { testgrpc.RegisterTestServiceServer(g, &echo{fn: fn}) })
		if err != nil {
			t.Fatal(err)
		}
		logx.Disable()
		gozero.AddServerInterceptors(s, lb, opts...)
		runGoZero(t, addr, s.Start)
		return addr
	case srvKafka:
		return serveRecords(t, lb, boundary, fn)
	}
	t.Fatalf("server adapter %d", k)
	return ""
}

func trustedHTTP(r *http.Request) bool { return r.Header.Get(internalHeader) == internalToken }

func trustedGRPC(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(internalHeader)
	return len(v) == 1 && v[0] == internalToken
}

func trustedKratos(ctx context.Context) bool {
	tr, ok := transport.FromServerContext(ctx)
	return ok && tr.RequestHeader().Get(internalHeader) == internalToken
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// runKratos starts a Kratos server and returns its host:port; it is
// stopped when the test ends.
func runKratos(t *testing.T, endpoint func() (*url.URL, error), start, stop func(context.Context) error) string {
	t.Helper()
	u, err := endpoint()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- start(context.Background()) }()
	t.Cleanup(func() {
		stop(context.Background())
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("Kratos server %s did not stop within 10s", u)
		}
	})
	return u.Host
}

// quiet turns off what a go-zero service starts beside its server.
func quiet(sc *service.ServiceConf) {
	sc.Name = "matrix"
	sc.Mode = service.TestMode // no load shedding, no stat reports
	sc.Log.Mode = "console"
	sc.Log.Level = "severe"
	sc.DevServer.Enabled = false
}

// freePort returns a loopback port nothing listens on at the moment
// (go-zero servers listen on a configured address and do not say which
// port :0 gave them).
func freePort(t *testing.T) int {
	t.Helper()
	l := listen(t)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// runGoZero runs a go-zero server's Start (which blocks, and panics when
// it cannot listen) until addr listens. go-zero servers stop only on the
// process's wrap-up and shutdown (proc.WrapUp, proc.Shutdown: go-zero's
// way for tests), which stop every go-zero server of the process: the
// cells run one after another, each stopping its own at its end.
func runGoZero(t *testing.T, addr string, start func()) {
	t.Helper()
	failed := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				failed <- fmt.Errorf("%v", r)
			}
		}()
		start()
	}()
	t.Cleanup(func() {
		proc.WrapUp()
		proc.Shutdown()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("go-zero server %s did not stop within 10s", addr)
		}
	})
	// go-zero's Start signals nothing: addr is polled every 10 ms.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-failed:
			t.Fatalf("go-zero server on %s did not start: %v", addr, err)
		case <-deadline:
			t.Fatalf("go-zero server on %s did not listen within 10s", addr)
		case <-tick.C:
		}
	}
}

// caller calls a service and returns its answer (the chain from it on).
// hdr are headers (gRPC metadata) the call carries; only the edge sets
// them, with the httpctx and grpcctx clients.
type caller func(ctx context.Context, hdr map[string]string) (string, error)

// callTimeout bounds every call; generous under -race on a loaded machine.
const callTimeout = 10 * time.Second

// dial returns a client of service over the client adapter k, picking
// with lb (the Kratos clients pick with the global selector, see
// TestMain, and write with lb).
func dial(t *testing.T, k clientKind, lb *graylb.LoadBalancer, service string) caller {
	t.Helper()
	switch k {
	case cliHTTPCtx:
		client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: callTimeout}
		t.Cleanup(client.CloseIdleConnections)
		return httpCaller(client, "http://"+service)
	case cliGRPCCtx:
		conn, err := grpc.NewClient("graylb:///"+service,
			append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return grpcCaller(testgrpc.NewTestServiceClient(conn))
	case cliKratosHTTP:
		c, err := khttp.NewClient(context.Background(), khttp.WithEndpoint("discovery:///"+service),
			khttp.WithDiscovery(discovery), khttp.WithSubset(0), khttp.WithMiddleware(graylbkratos.Client(lb)),
			khttp.WithTimeout(callTimeout), khttp.WithBlock())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return func(ctx context.Context, hdr map[string]string) (string, error) {
			noHeaders(hdr)
			var out answer
			err := c.Invoke(ctx, http.MethodGet, "/call", nil, &out)
			return out.Chain, err
		}
	case cliKratosGRPC:
		conn, err := kgrpc.DialInsecure(context.Background(), kgrpc.WithEndpoint("discovery:///"+service),
			kgrpc.WithDiscovery(discovery), kgrpc.WithSubset(0), kgrpc.WithMiddleware(graylbkratos.Client(lb)),
			kgrpc.WithTimeout(callTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		call := grpcCaller(testgrpc.NewTestServiceClient(conn))
		return func(ctx context.Context, hdr map[string]string) (string, error) {
			noHeaders(hdr)
			return call(ctx, nil)
		}
	case cliZrpc:
		var c zrpc.RpcClientConf
		if err := conf.FillDefault(&c); err != nil { // go-zero's defaults: its breaker, timeout, tracing
			t.Fatal(err)
		}
		c.Target = gozero.Target(service)
		cli, err := gozero.NewClient(lb, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Conn().Close() })
		call := grpcCaller(testgrpc.NewTestServiceClient(cli.Conn()))
		return func(ctx context.Context, hdr map[string]string) (string, error) {
			noHeaders(hdr)
			return call(ctx, nil)
		}
	case cliKafka:
		return dialRecords(t, lb, service)
	}
	t.Fatalf("client adapter %d", k)
	return nil
}

func noHeaders(hdr map[string]string) {
	if len(hdr) > 0 {
		panic("matrixtest: headers are sent by the edge's httpctx and grpcctx clients only")
	}
}

// httpCaller GETs base+"/call" with client.
func httpCaller(client *http.Client, base string) caller {
	return func(ctx context.Context, hdr map[string]string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/call", nil)
		if err != nil {
			return "", err
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		var out answer
		if err := json.Unmarshal(body, &out); err != nil {
			return "", fmt.Errorf("%v: %s", err, body)
		}
		return out.Chain, nil
	}
}

// grpcCaller calls UnaryCall with hdr as outgoing metadata.
func grpcCaller(c testgrpc.TestServiceClient) caller {
	return func(ctx context.Context, hdr map[string]string) (string, error) {
		for k, v := range hdr {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v)
		}
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return r.GetServerId(), err
	}
}

// direct returns a plain client (no graylb) of the instance at addr,
// speaking HTTP or gRPC: the untrusted caller, which reaches A as the
// public reaches an edge, not through graylb.
func direct(t *testing.T, overHTTP bool, addr string) caller {
	t.Helper()
	if overHTTP {
		client := &http.Client{Timeout: callTimeout}
		t.Cleanup(client.CloseIdleConnections)
		return httpCaller(client, "http://"+addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return grpcCaller(testgrpc.NewTestServiceClient(conn))
}

func splitHostPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(port)
	return host, p, err
}
