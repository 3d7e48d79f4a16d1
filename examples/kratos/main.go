// Command kratos runs edge → order → user with Kratos v2 servers and
// clients routed by graylb, on the in-memory registry: order (HTTP) and
// user (gRPC) each have a prod and a gray instance, registered through
// Kratos' Registrar interface, found through its Discovery interface, and
// picked by graylb's selector. The gray header the caller sends to the
// edge, a gray user (alice) or the canary decides every hop.
//
//	go run .               # from examples/kratos: fixed ports until Ctrl-C
//	go run . -once         # free ports, a few requests, exit
//	go run . -canary 50    # half of the requests nobody classified go gray
//
// With Nacos, the lines that change are the Supplier and the Registrar
// (docs/kratos.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"time"

	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type config struct {
	edge   string  // the edge's listen address
	canary float64 // canary percentage
	once   bool
}

func main() {
	var c config
	flag.StringVar(&c.edge, "edge", "127.0.0.1:8090", "the edge's listen address")
	flag.Float64Var(&c.canary, "canary", 0, "canary percentage (0-100) of the requests nobody classified")
	flag.BoolVar(&c.once, "once", false, "use free ports, send a few requests, check who answered, exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	if c.once {
		c.edge = "127.0.0.1:0"
	}
	d, err := start(c)
	if err != nil {
		return err
	}
	defer d.close()
	if c.once {
		return check(d.edge, out)
	}
	fmt.Fprintf(out, "edge on %s (order: HTTP, user: gRPC; each a prod and a gray instance)\n\nTry it (Ctrl-C stops):\n", d.edge)
	for _, h := range []string{"", " -H 'gray: true'", " -H 'uid: alice'", " -H 'uid: alice' -H 'gray: false'"} {
		fmt.Fprintf(out, "  curl%s %s/chain\n", h, d.edge)
	}
	<-ctx.Done()
	return nil
}

// check sends requests with each kind of header and checks both hops.
func check(edge string, out io.Writer) error {
	for _, tc := range []struct {
		header map[string]string
		want   string
	}{
		{nil, "order-prod → user-prod"},
		{map[string]string{"gray": "true"}, "order-gray → user-gray"},
		{map[string]string{"gray": "false"}, "order-prod → user-prod"},
		{map[string]string{"uid": "alice"}, "order-gray → user-gray"},
	} {
		got, err := get(edge, tc.header)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%v: %s\n", tc.header, got)
		if got != tc.want {
			return fmt.Errorf("%v: answered %q, want %q", tc.header, got, tc.want)
		}
	}
	return nil
}

func get(edge string, header map[string]string) (string, error) {
	req, err := http.NewRequest("GET", edge+"/chain", nil)
	if err != nil {
		return "", err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct{ Chain string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.Chain, nil
}

// demo is the running services.
type demo struct {
	edge  string // http://host:port
	close func()
}

func start(c config) (*demo, error) {
	klog.SetLogger(klog.NewStdLogger(io.Discard)) // Kratos logs each start and stop
	reg := graylb.NewRegistry()
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}, CanaryPercent: c.canary}))
	if err != nil {
		return nil, err
	}
	var stops []func()
	d := &demo{close: func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		lb.Close()
	}}
	fail := func(err error) (*demo, error) { d.close(); return nil, err }

	// The lines a Kratos service adds: graylb's selector for every Kratos
	// client, the Discovery (over the Nacos Supplier in production), the
	// server and client middleware.
	selector.SetGlobalSelector(graylbkratos.NewBuilder(lb))
	discovery := graylbkratos.NewDiscovery(reg)
	registrar := graylbkratos.NewRegistrar(reg)

	ctx := context.Background()
	// user: gRPC, a prod and a gray instance.
	for _, gray := range []bool{false, true} {
		name := "user-" + kind(gray)
		srv := kgrpc.NewServer(kgrpc.Address("127.0.0.1:0"), kgrpc.Middleware(graylbkratos.Server(lb)))
		srv.RegisterService(&userDesc, userFunc(func(context.Context) (string, error) { return name, nil }))
		if err := serve(ctx, srv, registrar, "user", gray, &stops); err != nil {
			return fail(err)
		}
	}
	conn, err := kgrpc.DialInsecure(ctx, kgrpc.WithEndpoint("discovery:///user.grpc"), kgrpc.WithDiscovery(discovery), kgrpc.WithSubset(0),
		kgrpc.WithMiddleware(graylbkratos.Client(lb)))
	if err != nil {
		return fail(err)
	}
	stops = append(stops, func() { conn.Close() })
	callUser := func(ctx context.Context) (string, error) {
		out := new(wrapperspb.StringValue)
		err := conn.Invoke(ctx, userMethod, wrapperspb.String(""), out)
		return out.GetValue(), err
	}
	// order: HTTP, a prod and a gray instance, calling user with its
	// request's context.
	for _, gray := range []bool{false, true} {
		name := "order-" + kind(gray)
		srv := khttp.NewServer(khttp.Address("127.0.0.1:0"), khttp.Middleware(graylbkratos.Server(lb)))
		route(srv, func(ctx context.Context) (string, error) {
			u, err := callUser(ctx)
			return name + " → " + u, err
		})
		if err := serve(ctx, srv, registrar, "order", gray, &stops); err != nil {
			return fail(err)
		}
	}
	orders, err := khttp.NewClient(ctx, khttp.WithEndpoint("discovery:///order.http"), khttp.WithDiscovery(discovery), khttp.WithSubset(0),
		khttp.WithMiddleware(graylbkratos.Client(lb)), khttp.WithBlock())
	if err != nil {
		return fail(err)
	}
	stops = append(stops, func() { orders.Close() })
	// The edge: HTTP, calling order.
	edge := khttp.NewServer(khttp.Address(c.edge), khttp.Middleware(graylbkratos.Server(lb)))
	route(edge, func(ctx context.Context) (string, error) {
		var out struct{ Chain string }
		err := orders.Invoke(ctx, "GET", "/chain", nil, &out)
		return out.Chain, err
	})
	u, err := edge.Endpoint()
	if err != nil {
		return fail(err)
	}
	go edge.Start(ctx)
	stops = append(stops, func() { edge.Stop(ctx) })
	d.edge = u.String()
	// Kratos' gRPC client hands its selector only the READY connections:
	// wait until both kinds answer, as a deployment's readiness check would.
	if err := ready(d.edge); err != nil {
		return fail(err)
	}
	return d, nil
}

func kind(gray bool) string {
	if gray {
		return "gray"
	}
	return "prod"
}

// route serves GET /chain with fn, through the server's middleware.
func route(srv *khttp.Server, fn func(context.Context) (string, error)) {
	srv.Route("/").GET("/chain", func(c khttp.Context) error {
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
}

// serve starts srv and registers it as an instance of name, as
// kratos.New(kratos.Registrar(registrar), kratos.Server(srv)).Run() would.
func serve(ctx context.Context, srv interface {
	Start(context.Context) error
	Stop(context.Context) error
}, registrar registry.Registrar, name string, gray bool, stops *[]func()) error {
	var endpoint string
	switch s := srv.(type) {
	case *khttp.Server:
		u, err := s.Endpoint()
		if err != nil {
			return err
		}
		endpoint = u.String()
	case *kgrpc.Server:
		u, err := s.Endpoint()
		if err != nil {
			return err
		}
		endpoint = u.String()
	}
	go srv.Start(ctx)
	si := &registry.ServiceInstance{ID: name + "-" + kind(gray), Name: name, Version: "v1",
		Metadata: map[string]string{"gray": fmt.Sprint(gray)}, Endpoints: []string{endpoint}}
	if err := registrar.Register(ctx, si); err != nil {
		srv.Stop(ctx)
		return err
	}
	*stops = append(*stops, func() {
		registrar.Deregister(ctx, si)
		srv.Stop(ctx)
	})
	return nil
}

// ready waits until a gray and a prod request each reach their kind.
func ready(edge string) error {
	deadline := time.Now().Add(20 * time.Second)
	for _, tc := range []struct{ gray, want string }{{"true", "order-gray → user-gray"}, {"false", "order-prod → user-prod"}} {
		for {
			got, err := get(edge, map[string]string{"gray": tc.gray})
			if err == nil && got == tc.want {
				break
			}
			if time.Now().After(deadline) {
				return errors.Join(errors.New("the services did not become ready within 20s"), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// The user service over gRPC, written out as protoc-gen-go-grpc writes a
// service (a real service uses its generated code): one unary method over
// wrapperspb.StringValue. The handler runs the server's interceptor, so
// Kratos' server middleware runs.
const userMethod = "/demo.User/Get"

type userServer interface {
	Get(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

type userFunc func(context.Context) (string, error)

func (f userFunc) Get(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	s, err := f(ctx)
	return wrapperspb.String(s), err
}

var userDesc = grpc.ServiceDesc{
	ServiceName: "demo.User",
	HandlerType: (*userServer)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(srv interface{}, ctx context.Context, dec func(interface{}) error, in grpc.UnaryServerInterceptor) (interface{}, error) {
		req := new(wrapperspb.StringValue)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req interface{}) (interface{}, error) {
			return srv.(userServer).Get(ctx, req.(*wrapperspb.StringValue))
		}
		if in == nil {
			return h(ctx, req)
		}
		return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: userMethod}, h)
	}}},
}
