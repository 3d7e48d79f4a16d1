// Command http runs a gateway and a service with a prod and a gray
// instance over HTTP, on fixed ports, until Ctrl-C; it prints the curl
// commands to try and serves graylb's debug page. It uses Nacos when an
// address is given (-nacos or GRAYLB_NACOS_ADDR), else graylb's in-memory
// registry:
//
//	go run ./http                       # from examples/
//	go run ./http -nacos 127.0.0.1:8848 # with make nacos-up
//	go run ./http -once                 # free ports, a few requests, exit
//
// The gateway serves graylb's metrics at /metrics in the Prometheus text
// format, through OpenTelemetry's Prometheus exporter (-metrics=false
// leaves them out).
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
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// config is what the flags set.
type config struct {
	nacos    string
	gateway  string // listen address of the gateway
	prod     string // of user-service's prod instance
	gray     string // of its gray instance
	once     bool
	register bool // register user-service's instances (false: another process does, e.g. nacos-register)
	metrics  bool // serve /metrics
}

func main() {
	var c config
	flag.StringVar(&c.nacos, "nacos", os.Getenv("GRAYLB_NACOS_ADDR"), "Nacos server host:port (empty: in-memory registry)")
	flag.StringVar(&c.gateway, "gateway", "127.0.0.1:8080", "gateway listen address")
	flag.StringVar(&c.prod, "prod", "127.0.0.1:8081", "user-service prod instance listen address")
	flag.StringVar(&c.gray, "gray", "127.0.0.1:8082", "user-service gray instance listen address")
	flag.BoolVar(&c.once, "once", false, "use free ports, send a few requests, check and exit")
	flag.BoolVar(&c.register, "register", true, "run and register user-service's prod and gray instances")
	flag.BoolVar(&c.metrics, "metrics", true, "serve graylb's metrics at /metrics (Prometheus text format, through OpenTelemetry)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "http example:", err)
		os.Exit(1)
	}
}

// demo is the running example.
type demo struct {
	gateway  string // http://host:port
	lb       *graylb.LoadBalancer
	registry graylb.Supplier
	closers  []func()
}

func (d *demo) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	if c.once {
		c.gateway, c.prod, c.gray = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	}
	d, err := start(c, out)
	if err != nil {
		return err
	}
	defer d.close()
	if c.once {
		return check(d, out)
	}
	fmt.Fprintf(out, `
Try it (Ctrl-C stops):
  curl %[1]s/                       # prod: user-service prod answers
  curl -H 'gray: true' %[1]s/       # gray: user-service gray answers
  curl -H 'gray: false' %[1]s/      # prod
  open %[1]s/debug/graylb           # the debug page (?format=json for JSON)
`, d.gateway)
	if c.metrics {
		fmt.Fprintf(out, "  curl -s %s/metrics | grep '^graylb_'   # picks, instances, rule changes\n", d.gateway)
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

// start runs user-service's instances (unless c.register is off) and the
// gateway.
func start(c config, out io.Writer) (_ *demo, err error) {
	d := &demo{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	var (
		supplier graylb.Supplier
		register func(name string, port int, gray bool) (func(), error)
	)
	if c.nacos == "" {
		reg := graylb.NewRegistry()
		supplier = reg
		register = func(name string, port int, gray bool) (func(), error) {
			md := map[string]string{"gray": fmt.Sprint(gray)}
			return func() {}, reg.Register(graylb.NewInstance(name, "127.0.0.1", port, md))
		}
		fmt.Fprintln(out, "registry: in memory")
	} else {
		sup, err := nacos.NewSupplier(nacos.WithServers(c.nacos))
		if err != nil {
			return nil, err
		}
		d.closers = append(d.closers, func() { sup.Close() })
		supplier = sup
		register = func(name string, port int, gray bool) (func(), error) {
			r, err := nacos.Register(context.Background(), nacos.Service{Name: name, Host: "127.0.0.1", Port: port, Gray: &gray}, nacos.WithServers(c.nacos))
			if err != nil {
				return nil, err
			}
			return func() { r.Close() }, nil
		}
		fmt.Fprintln(out, "registry: Nacos at", c.nacos)
	}

	if c.register {
		// Two instances of user-service: prod and gray.
		for _, gray := range []bool{false, true} {
			addr := map[bool]string{false: c.prod, true: c.gray}[gray]
			port, stop, err := serve(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "user-service gray=%v (request gray header %q)\n", gray, r.Header.Get("gray"))
			}))
			if err != nil {
				return nil, err
			}
			d.closers = append(d.closers, stop)
			dereg, err := register("user-service", port, gray)
			if err != nil {
				return nil, err
			}
			d.closers = append(d.closers, dereg)
			fmt.Fprintf(out, "user-service %s instance on 127.0.0.1:%d\n", map[bool]string{false: "prod", true: "gray"}[gray], port)
		}
	}

	// The gateway: middleware keeps the incoming headers, the transport
	// routes http://user-service/ by them; the debug page shows the rest.
	// Picks are counted twice: for the debug page and, with -metrics, for
	// OpenTelemetry (graylb.WithObserver feeds both).
	picks := debugpage.NewPickCounters()
	mux := http.NewServeMux()
	var (
		otelPicks graylb.Observer
		meter     *sdkmetric.MeterProvider
	)
	if c.metrics {
		// A registry of the example's own, not the process-wide default.
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, err
		}
		meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		d.closers = append(d.closers, func() { meter.Shutdown(context.Background()) })
		if otelPicks, err = otelgraylb.Observer(meter.Meter(otelgraylb.ScopeName)); err != nil {
			return nil, err
		}
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	// Outlier ejection with its defaults: an instance failing 5 calls in a
	// row rests; the debug page shows each instance's calls.
	lb, err := graylb.New(supplier,
		graylb.WithObserver(picks.Observe, otelPicks),
		graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	if err != nil {
		return nil, err
	}
	d.lb, d.registry = lb, supplier
	d.closers = append(d.closers, func() { lb.Close() })
	if meter != nil {
		r, err := otelgraylb.Register(meter.Meter(otelgraylb.ScopeName), lb)
		if err != nil {
			return nil, err
		}
		d.closers = append(d.closers, func() { r.Unregister() })
	}
	client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 5 * time.Second}
	mux.Handle("/debug/graylb", debugpage.Handler(lb, debugpage.WithPickCounters(picks)))
	mux.Handle("/", httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://user-service/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})))
	gwPort, stop, err := serve(c.gateway, mux)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, stop)
	d.gateway = fmt.Sprintf("http://127.0.0.1:%d", gwPort)
	fmt.Fprintln(out, "gateway on", d.gateway)
	return d, nil
}

// check sends a request of each kind through the gateway and checks which
// instance answered.
func check(d *demo, out io.Writer) error {
	for _, gray := range []string{"", "true", "false"} {
		var body string
		want := "user-service gray=" + fmt.Sprint(gray == "true")
		// Nacos pushes new registrations within about a second.
		deadline := time.Now().Add(10 * time.Second)
		for {
			req, _ := http.NewRequest(http.MethodGet, d.gateway+"/", nil)
			if gray != "" {
				req.Header.Set("gray", gray)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = strings.TrimSpace(string(b))
			if resp.StatusCode == http.StatusOK && strings.HasPrefix(body, want) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("gray header %q: got %q, want prefix %q", gray, body, want)
			}
			time.Sleep(100 * time.Millisecond) // waiting for the registry to push, not for a goroutine
		}
		fmt.Fprintf(out, "gray header %-7q -> %s\n", gray, body)
	}
	return nil
}

// serve starts h on addr ("host:0" for a free port) and returns the port.
func serve(addr string, h http.Handler) (int, func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "serve:", err)
		}
	}()
	return lis.Addr().(*net.TCPAddr).Port, func() { srv.Close() }, nil
}
