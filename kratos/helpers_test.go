package graylbkratos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) {
	klog.SetLogger(klog.NewStdLogger(io.Discard)) // Kratos logs every start and stop
	os.Exit(m.Run())
}

// The gRPC service the tests run, without generated code: one unary
// method over wrapperspb.StringValue, its handler written as
// protoc-gen-go-grpc writes one (it runs the server's interceptor, so
// Kratos' server middleware runs).
const echoMethod = "/graylbtest.Echo/Call"

type echoServer interface {
	Call(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

type echoFunc func(context.Context) (string, error)

func (f echoFunc) Call(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	s, err := f(ctx)
	if err != nil {
		return nil, err
	}
	return wrapperspb.String(s), nil
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "graylbtest.Echo",
	HandlerType: (*echoServer)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv interface{}, ctx context.Context, dec func(interface{}) error, in grpc.UnaryServerInterceptor) (interface{}, error) {
		req := new(wrapperspb.StringValue)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req interface{}) (interface{}, error) {
			return srv.(echoServer).Call(ctx, req.(*wrapperspb.StringValue))
		}
		if in == nil {
			return h(ctx, req)
		}
		return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: echoMethod}, h)
	}}},
}

// server is a running Kratos server.
type server struct {
	endpoint string // scheme://host:port
	stop     func()
}

// startServer starts a Kratos server of scheme (http or grpc) whose one
// route answers what fn returns, its middleware ms.
func startServer(t testing.TB, scheme string, fn echoFunc, ms ...middleware.Middleware) server {
	t.Helper()
	ctx := context.Background()
	switch scheme {
	case "http":
		srv := khttp.NewServer(khttp.Address("127.0.0.1:0"), khttp.Middleware(ms...))
		srv.Route("/").GET("/call", func(c khttp.Context) error {
			h := c.Middleware(func(ctx context.Context, _ interface{}) (interface{}, error) {
				s, err := fn(ctx)
				return map[string]string{"chain": s}, err
			})
			out, err := h(c, nil)
			if err != nil {
				return err
			}
			return c.Result(200, out)
		})
		return run(t, srv.Endpoint, func() error { return srv.Start(ctx) }, func() { srv.Stop(ctx) })
	case "grpc":
		srv := kgrpc.NewServer(kgrpc.Address("127.0.0.1:0"), kgrpc.Middleware(ms...))
		srv.RegisterService(&echoDesc, fn)
		return run(t, srv.Endpoint, func() error { return srv.Start(ctx) }, func() { srv.Stop(ctx) })
	}
	t.Fatalf("scheme %q", scheme)
	return server{}
}

func run(t testing.TB, endpoint func() (*url.URL, error), start func() error, stop func()) server {
	t.Helper()
	u, err := endpoint()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- start() }()
	s := server{endpoint: u.String(), stop: func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("server %s did not stop within 10s", u)
		}
	}}
	t.Cleanup(s.stop)
	return s
}

// caller calls one service over Kratos' client of scheme, through
// discovery:///<service>.
type caller func(ctx context.Context) (string, error)

func newCaller(t testing.TB, scheme, service string, d registry.Discovery, ms ...middleware.Middleware) caller {
	t.Helper()
	ctx := context.Background()
	switch scheme {
	case "http":
		c, err := khttp.NewClient(ctx, khttp.WithEndpoint("discovery:///"+service), khttp.WithDiscovery(d),
			khttp.WithMiddleware(ms...), khttp.WithTimeout(10*time.Second), khttp.WithBlock())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return func(ctx context.Context) (string, error) {
			var out struct{ Chain string }
			err := c.Invoke(ctx, "GET", "/call", nil, &out)
			return out.Chain, err
		}
	case "grpc":
		conn, err := kgrpc.DialInsecure(ctx, kgrpc.WithEndpoint("discovery:///"+service), kgrpc.WithDiscovery(d),
			kgrpc.WithMiddleware(ms...), kgrpc.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return func(ctx context.Context) (string, error) {
			out := new(wrapperspb.StringValue)
			err := conn.Invoke(ctx, echoMethod, wrapperspb.String(""), out)
			return out.GetValue(), err
		}
	}
	t.Fatalf("scheme %q", scheme)
	return nil
}

// register registers a Kratos instance of name at endpoint, gray or prod.
func register(t testing.TB, reg *graylb.Registry, name, endpoint string, gray bool) {
	t.Helper()
	si := &registry.ServiceInstance{ID: name + "-" + endpoint, Name: name, Version: "v1",
		Metadata: map[string]string{"gray": fmt.Sprint(gray)}, Endpoints: []string{endpoint}}
	r := graylbkratos.NewRegistrar(reg)
	if err := r.Register(context.Background(), si); err != nil {
		t.Fatal(err)
	}
}

func kindName(gray bool) string {
	if gray {
		return "gray"
	}
	return "prod"
}

// chain is edge → a → b, every service a Kratos server of one scheme,
// a and b each with a gray and a prod instance; the edge answers
// a-<kind>>b-<kind>.
type chain struct {
	scheme string
	edge   string // the edge's endpoint
	conn   *grpc.ClientConn
}

// startChain starts the chain over lb (the global selector routes with
// it), the edge's server middleware with edgeOpts.
func startChain(t testing.TB, lb *graylb.LoadBalancer, reg *graylb.Registry, scheme string, edgeOpts ...graylbkratos.Option) *chain {
	t.Helper()
	b := graylbkratos.NewBuilder(lb)
	t.Cleanup(b.Close)
	selector.SetGlobalSelector(b)
	d := graylbkratos.NewDiscovery(reg)
	for _, gray := range []bool{false, true} {
		kind := kindName(gray)
		s := startServer(t, scheme, func(context.Context) (string, error) { return "b-" + kind, nil }, graylbkratos.Server(lb))
		register(t, reg, "b", s.endpoint, gray)
	}
	toB := newCaller(t, scheme, "b."+scheme, d, graylbkratos.Client(lb))
	for _, gray := range []bool{false, true} {
		kind := kindName(gray)
		s := startServer(t, scheme, func(ctx context.Context) (string, error) {
			r, err := toB(ctx)
			return "a-" + kind + ">" + r, err
		}, graylbkratos.Server(lb))
		register(t, reg, "a", s.endpoint, gray)
	}
	toA := newCaller(t, scheme, "a."+scheme, d, graylbkratos.Client(lb))
	edge := startServer(t, scheme, echoFunc(toA), graylbkratos.Server(lb, edgeOpts...))
	c := &chain{scheme: scheme, edge: edge.endpoint}
	if scheme == "grpc" {
		conn, err := grpc.Dial(strings.TrimPrefix(edge.endpoint, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c.conn = conn
	}
	c.warmUp(t)
	return c
}

// poll calls cond every tick until it holds or within passes, and
// reports whether it held.
func poll(within, tick time.Duration, cond func() bool) bool {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for deadline := time.After(within); !cond(); {
		select {
		case <-ticker.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

// warmUp waits until every instance answers: Kratos' gRPC client hands
// its selector only the connections that are READY, so until then a gray
// call may see no gray instance and fall back to prod.
func (c *chain) warmUp(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, kind := range []string{"true", "false"} {
		want := "a-gray>b-gray"
		if kind == "false" {
			want = "a-prod>b-prod"
		}
		for ok := 0; ok < 3; {
			var got string
			var err error
			if !poll(time.Until(deadline), 20*time.Millisecond, func() bool {
				got, err = c.call(map[string]string{"gray": kind})
				return err == nil && got == want
			}) {
				t.Fatalf("chain over %s not ready within 20s: gray: %s answered %q, %v", c.scheme, kind, got, err)
			}
			ok++
		}
	}
}

// call sends one request to the edge with headers and returns its chain.
func (c *chain) call(headers map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.scheme == "grpc" {
		for k, v := range headers {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v)
		}
		out := new(wrapperspb.StringValue)
		err := c.conn.Invoke(ctx, echoMethod, wrapperspb.String(""), out)
		return out.GetValue(), err
	}
	req, err := http.NewRequestWithContext(ctx, "GET", c.edge+"/call", nil)
	if err != nil {
		return "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	var out struct{ Chain string }
	if err := json.Unmarshal(body, &out); err != nil {
		return "", fmt.Errorf("%w: %s", err, body)
	}
	return out.Chain, nil
}
