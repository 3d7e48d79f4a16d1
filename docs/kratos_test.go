package docs

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2"
	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	kratosnacos "github.com/graylb/graylb/kratos/nacos"
	"github.com/graylb/graylb/nacos"
	"google.golang.org/grpc"
)

// kratosWire is docs/kratos.md's wiring of a Kratos service; use gets
// what it built.
func kratosWire(ctx context.Context, supplier graylb.Supplier,
	use func(lb *graylb.LoadBalancer, httpSrv *khttp.Server, grpcSrv *kgrpc.Server, users *khttp.Client, conn *grpc.ClientConn) error) error {
	// snippet: kratos-wire
	lb, err := graylb.New(supplier) // a nacos.Supplier; graylb.NewRegistry() in tests
	if err != nil {
		return err
	}
	defer lb.Close()
	// every Kratos client, HTTP and gRPC, picks with graylb
	selector.SetGlobalSelector(graylbkratos.NewBuilder(lb))
	discovery := graylbkratos.NewDiscovery(supplier)

	// servers keep the request's kind for the calls their handlers make
	httpSrv := khttp.NewServer(khttp.Address(":8000"), khttp.Middleware(graylbkratos.Server(lb)))
	grpcSrv := kgrpc.NewServer(kgrpc.Address(":9000"), kgrpc.Middleware(graylbkratos.Server(lb)))

	// clients pass it on to the next hop; WithSubset(0): graylb sees every instance
	users, err := khttp.NewClient(ctx, khttp.WithEndpoint("discovery:///user.http"),
		khttp.WithDiscovery(discovery), khttp.WithSubset(0), khttp.WithMiddleware(graylbkratos.Client(lb)))
	if err != nil {
		return err
	}
	conn, err := kgrpc.DialInsecure(ctx, kgrpc.WithEndpoint("discovery:///user.grpc"),
		kgrpc.WithDiscovery(discovery), kgrpc.WithSubset(0), kgrpc.WithMiddleware(graylbkratos.Client(lb)))
	if err != nil {
		return err
	}
	// end snippet
	defer users.Close()
	defer conn.Close()
	return use(lb, httpSrv, grpcSrv, users, conn)
}

// kratosUser starts a Kratos HTTP instance of user answering its kind,
// registered as user.http.
func kratosUser(t *testing.T, reg *graylb.Registry, gray bool) {
	t.Helper()
	kind := map[bool]string{false: "prod", true: "gray"}[gray]
	srv := khttp.NewServer(khttp.Address("127.0.0.1:0"))
	srv.Route("/").GET("/who", func(c khttp.Context) error { return c.Result(200, map[string]string{"kind": kind}) })
	u, err := srv.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start(context.Background())
	t.Cleanup(func() { srv.Stop(context.Background()) })
	si := &registry.ServiceInstance{ID: kind, Name: "user", Metadata: map[string]string{"gray": fmt.Sprint(gray)}, Endpoints: []string{u.String()}}
	if err := graylbkratos.NewRegistrar(reg).Register(context.Background(), si); err != nil {
		t.Fatal(err)
	}
}

// who asks user.http through client which kind answered.
func who(ctx context.Context, client *khttp.Client) (string, error) {
	var out struct{ Kind string }
	err := client.Invoke(ctx, "GET", "/who", nil, &out)
	return out.Kind, err
}

// docs/kratos.md: the wiring, a server facing the public.
func TestKratosTour(t *testing.T) {
	klog.SetLogger(klog.NewStdLogger(io.Discard))
	reg := graylb.NewRegistry()
	kratosUser(t, reg, false)
	kratosUser(t, reg, true)
	// Stand-ins for your own checks: the caller's address or certificate,
	// a verified token.
	isInternal := func(ctx context.Context) bool {
		r, ok := khttp.RequestFromServerContext(ctx)
		return ok && r.Header.Get("x-internal") != ""
	}
	authenticatedUser := func(ctx context.Context) string {
		if r, ok := khttp.RequestFromServerContext(ctx); ok && r.Header.Get("authorization") == "Bearer t-alice" {
			return "alice"
		}
		return ""
	}
	ctx := context.Background()
	err := kratosWire(ctx, reg, func(lb *graylb.LoadBalancer, _ *khttp.Server, _ *kgrpc.Server, users *khttp.Client, _ *grpc.ClientConn) error {
		if err := lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}); err != nil {
			return err
		}
		// The client resolves in the background: wait for both kinds.
		var g, p string
		var err1, err2 error
		if !poll(10*time.Second, 20*time.Millisecond, func() bool {
			g, err1 = who(graylb.WithValue(ctx, "gray", "true"), users)
			p, err2 = who(ctx, users)
			return g == "gray" && p == "prod"
		}) {
			return fmt.Errorf("user.http not reached by kind within 10s: %q %v, %q %v", g, err1, p, err2)
		}

		// snippet: kratos-edge
		// facing the public: no routing key from callers; the user id comes from your auth
		edge := khttp.NewServer(khttp.Address(":8080"), khttp.Middleware(
			graylbkratos.Server(lb, graylbkratos.WithTrusted(isInternal), graylbkratos.WithUser(authenticatedUser))))
		// end snippet

		edge.Route("/").GET("/", func(c khttp.Context) error {
			h := c.Middleware(func(ctx context.Context, _ interface{}) (interface{}, error) { return who(ctx, users) })
			out, err := h(c, nil)
			if err != nil {
				return err
			}
			return c.String(200, out.(string))
		})
		for _, c := range []struct {
			header map[string]string
			want   string
		}{
			{map[string]string{"gray": "true"}, "prod"},
			{map[string]string{"uid": "alice"}, "prod"},
			{map[string]string{"authorization": "Bearer t-alice"}, "gray"},
			{map[string]string{"gray": "true", "x-internal": "1"}, "gray"},
		} {
			req := httptest.NewRequest("GET", "/", nil)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			edge.ServeHTTP(rec, req)
			if got := rec.Body.String(); got != c.want {
				t.Errorf("edge %v: %q, want %q", c.header, got, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// kratosNacos is docs/kratos.md's registration in Nacos; stop ends the
// app as a signal would.
func kratosNacos(ctx context.Context, servers []string, httpSrv *khttp.Server, grpcSrv *kgrpc.Server,
	started func(graylb.Supplier), stop <-chan struct{}) error {
	// snippet: kratos-nacos
	client, err := nacos.NewClient(ctx, nacos.WithServers(servers...))
	if err != nil {
		return err
	}
	defer client.Close()
	supplier, err := nacos.NewSupplier(nacos.WithClient(client)) // for graylb.New and NewDiscovery
	if err != nil {
		return err
	}
	defer supplier.Close()

	// each endpoint registered as order.http, order.grpc; gray from the
	// metadata's gray key, else GRAYLB_GRAY; deregistered gracefully on stop
	app := kratos.New(kratos.Name("order"), kratos.Server(httpSrv, grpcSrv),
		kratos.Registrar(kratosnacos.NewRegistrar(kratosnacos.WithNacosOptions(nacos.WithClient(client)))))
	// end snippet
	started(supplier)
	go func() {
		<-stop
		app.Stop()
	}()
	return app.Run()
}

// The Nacos snippet against a real Nacos server (GRAYLB_NACOS_ADDR): the
// app's endpoints are found gray (GRAYLB_GRAY=true) through the
// Discovery, and gone after the app stopped.
func TestKratosNacos(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped under -race: nacos-sdk-go races inside its RPC client; make test runs it without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	klog.SetLogger(klog.NewStdLogger(io.Discard))
	dir, err := os.MkdirTemp("", "graylb-docs-kratos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The SDK's writer goroutines finish on their own.
		poll(time.Second, 20*time.Millisecond, func() bool { return os.RemoveAll(dir) == nil })
	})
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("GRAYLB_GRAY", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	httpSrv := khttp.NewServer(khttp.Address("127.0.0.1:0"))
	grpcSrv := kgrpc.NewServer(kgrpc.Address("127.0.0.1:0"))
	stop := make(chan struct{})
	found := make(chan error, 1)
	count := func(d *graylbkratos.Discovery, service string) int {
		list, _ := d.GetService(ctx, service)
		n := 0
		for _, si := range list {
			if si.Metadata["gray"] == "true" && si.Metadata["kind"] != "" {
				n++
			}
		}
		return n
	}
	var d *graylbkratos.Discovery
	err = kratosNacos(ctx, []string{addr}, httpSrv, grpcSrv, func(s graylb.Supplier) {
		d = graylbkratos.NewDiscovery(s)
		go func() {
			defer close(stop)
			// Waiting for Nacos' push.
			if !poll(15*time.Second, 50*time.Millisecond, func() bool { return count(d, "order.http") > 0 && count(d, "order.grpc") > 0 }) {
				found <- fmt.Errorf("order.http and order.grpc not found gray within 15s")
				return
			}
			found <- nil
		}()
	}, stop)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-found; err != nil {
		t.Fatal(err)
	}
}
