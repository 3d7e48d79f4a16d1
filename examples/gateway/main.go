// Command gateway runs an edge gateway in front of two services, the way
// a Spring Cloud Gateway or Zuul edge makes the gray decision and routes
// by path: an httputil.ReverseProxy whose routes map path prefixes to
// service names through graylb's Transport, behind graylb's trust
// boundary. Requests go client → gateway → user-service (prod, gray) →
// order-service (prod, gray).
//
//   - The user id comes from a stand-in authentication function
//     (Authorization: Bearer t-<user>, as a verified token would give it);
//     a uid header from the caller is never an identity.
//   - Only a trusted caller (here the user "qa") may choose gray by
//     header; everybody else's gray, uid and version headers are dropped.
//   - Rules: alice is a gray user; a sticky canary sends 10% of the other
//     authenticated users gray. The canary draws users, not requests: a
//     caller without a user id (anonymous) stays prod on every hop, as the
//     gateway settles its side (gray: false).
//   - The debug page is at /debug/graylb and graylb's metrics at /metrics
//     (Prometheus text format, through OpenTelemetry), for trusted callers
//     only.
//
// It runs on fixed, flag-set ports until Ctrl-C and prints curl commands:
//
//	go run ./gateway         # from examples/
//	go run ./gateway -once   # free ports, a few requests, exit
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

type config struct {
	listen   string // the gateway's listen address
	basePort int    // user-service prod/gray, order-service prod/gray on basePort..basePort+3 (0: free ports)
	canary   float64
	once     bool
}

func main() {
	var c config
	flag.StringVar(&c.listen, "listen", "127.0.0.1:8000", "gateway listen address")
	flag.IntVar(&c.basePort, "base-port", 8001, "first port of the four service instances")
	flag.Float64Var(&c.canary, "canary", 10, "canary percentage of authenticated users sent gray (anonymous callers stay prod)")
	flag.BoolVar(&c.once, "once", false, "use free ports, send a few requests, check and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gateway example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	if c.once {
		c.listen, c.basePort, c.canary = "127.0.0.1:0", 0, 0
	}
	d, err := start(c, nil)
	if err != nil {
		return err
	}
	defer d.close()
	if c.once {
		return check(d, out)
	}
	fmt.Fprintf(out, `gateway on %[1]s
Try it (Ctrl-C stops):
  curl %[1]s/users/1                                          # anonymous: prod (the canary draws users only)
  curl -H 'Authorization: Bearer t-alice' %[1]s/users/1       # alice is a gray user: gray
  curl -H 'Authorization: Bearer t-bob' -H 'gray: true' %[1]s/users/1   # untrusted header dropped
  curl -H 'Authorization: Bearer t-qa' -H 'gray: true' %[1]s/users/1    # qa is trusted: gray
  curl -N -H 'Authorization: Bearer t-alice' %[1]s/users/stream         # a streamed response
  curl -H 'Authorization: Bearer t-qa' %[1]s/debug/graylb               # the debug page
  curl -H 'Authorization: Bearer t-qa' %[1]s/metrics                    # picks, instances, rule changes
`, d.url)
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

// authenticate is the stand-in for real authentication: it returns the
// user of a "Bearer t-<user>" token ("" for none). A real gateway
// verifies a signed token or a session here.
func authenticate(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer t-")
	if !ok || tok == "" || len(tok) > 64 || strings.ContainsAny(tok, " \t\r\n") {
		return ""
	}
	return tok
}

// trusted reports whether the caller may choose its side by header.
func trusted(r *http.Request) bool { return authenticate(r) == "qa" }

// routes maps path prefixes to service names.
var routes = map[string]string{
	"/users/":  "user-service",
	"/orders/": "order-service",
}

// demo is the running example.
type demo struct {
	url     string // the gateway's http://host:port
	lb      *graylb.LoadBalancer
	picks   *debugpage.PickCounters // the gateway's picks, for the debug page
	metrics http.Handler            // the gateway's /metrics
	closers []func()
}

func (d *demo) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// hooks lets tests pace a streamed response: the service waits for a
// value on next before each chunk after the first.
type hooks struct {
	next chan struct{}
}

func start(c config, h *hooks) (_ *demo, err error) {
	d := &demo{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	reg := graylb.NewRegistry()
	port := func(i int) string {
		if c.basePort == 0 {
			return "127.0.0.1:0"
		}
		return fmt.Sprintf("127.0.0.1:%d", c.basePort+i)
	}
	// Each service instance has a LoadBalancer of its own, as a separate
	// process would; it calls the next service through graylb.
	newLB := func(rules graylb.Rules) (*graylb.LoadBalancer, error) {
		lb, err := graylb.New(reg, graylb.WithRules(rules))
		if err == nil {
			d.closers = append(d.closers, func() { lb.Close() })
		}
		return lb, err
	}
	for i, spec := range []struct {
		service, name string
		gray          bool
		next          string
	}{
		{"order-service", "order-prod", false, ""},
		{"order-service", "order-gray", true, ""},
		{"user-service", "user-prod", false, "order-service"},
		{"user-service", "user-gray", true, "order-service"},
	} {
		lb, err := newLB(graylb.Rules{})
		if err != nil {
			return nil, err
		}
		client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 5 * time.Second}
		p, stop, err := serve(port((i+2)%4), httpctx.Middleware(lb)(service(spec.name, spec.next, client, h)))
		if err != nil {
			return nil, err
		}
		d.closers = append(d.closers, stop)
		if err := reg.Register(graylb.NewInstance(spec.service, "127.0.0.1", p, map[string]string{"gray": fmt.Sprint(spec.gray)})); err != nil {
			return nil, err
		}
	}

	// The gateway. Its picks are counted twice: for the debug page and for
	// OpenTelemetry, exported at /metrics (graylb.WithObserver feeds both).
	d.picks = debugpage.NewPickCounters()
	promReg := prometheus.NewRegistry() // the example's own, not the process-wide default
	exp, err := otelprom.New(otelprom.WithRegisterer(promReg))
	if err != nil {
		return nil, err
	}
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	d.closers = append(d.closers, func() { meter.Shutdown(context.Background()) })
	otelPicks, err := otelgraylb.Observer(meter.Meter(otelgraylb.ScopeName))
	if err != nil {
		return nil, err
	}
	d.metrics = promhttp.HandlerFor(promReg, promhttp.HandlerOpts{})
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}, CanaryPercent: c.canary}),
		graylb.WithObserver(d.picks.Observe, otelPicks))
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { lb.Close() })
	d.lb = lb
	gauges, err := otelgraylb.Register(meter.Meter(otelgraylb.ScopeName), lb)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { gauges.Unregister() })
	p, stop, err := serve(c.listen, gateway(d))
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, stop)
	d.url = fmt.Sprintf("http://127.0.0.1:%d", p)
	return d, nil
}

// gateway returns the edge: the trust boundary and the user id from
// authentication (httpctx.Middleware), the side of an anonymous caller
// settled (prod), then a reverse proxy that maps the path prefix to a
// service name and lets graylb's Transport pick the instance; the debug
// page and the metrics for trusted callers.
func gateway(d *demo) http.Handler {
	lb := d.lb
	prefixes := make([]string, 0, len(routes))
	for p := range routes {
		prefixes = append(prefixes, p)
	}
	sort.Slice(prefixes, func(i, j int) bool { return len(prefixes[i]) > len(prefixes[j]) }) // longest first
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			for _, p := range prefixes {
				if strings.HasPrefix(pr.In.URL.Path, p) {
					// http://<service>/...: the Transport resolves the name.
					pr.SetURL(&url.URL{Scheme: "http", Host: routes[p]})
					pr.Out.Header.Del("Authorization") // the services trust the gateway's uid
					return
				}
			}
		},
		Transport:     httpctx.NewTransport(lb),
		FlushInterval: -1, // pass streamed responses on as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status := http.StatusBadGateway
			if errors.Is(err, graylb.ErrNoInstance) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, "gateway: "+err.Error(), status)
		},
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/graylb", trustedOnly(debugpage.Handler(lb, debugpage.WithPickCounters(d.picks))))
	mux.Handle("/metrics", trustedOnly(d.metrics))
	for p := range routes {
		mux.Handle(p, proxy)
	}
	return httpctx.Middleware(lb, httpctx.WithTrusted(trusted), httpctx.WithUser(authenticate))(
		anonymousProd(lb.Keys().Gray, mux))
}

// anonymousProd settles the side of a caller without a user id: prod (a
// context value, so the Transport writes gray: false and no later hop's
// canary draws it either). The canary then draws authenticated users
// only, each sticky by its id; an anonymous caller's requests would
// otherwise each be drawn anew.
func anonymousProd(grayKey string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if authenticate(r) == "" {
			r = r.WithContext(graylb.WithValue(r.Context(), grayKey, "false"))
		}
		next.ServeHTTP(w, r)
	})
}

// trustedOnly serves h to trusted callers and 403 to everybody else.
func trustedOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !trusted(r) {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// service is one instance: /users/stream streams chunks, /users/ws
// upgrades to a line echo, anything else answers with its name after the
// next service's answer.
func service(name, next string, client *http.Client, h *hooks) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/stream"):
			for i := 1; i <= 3; i++ {
				if i > 1 && h != nil {
					select {
					case <-h.next:
					case <-r.Context().Done():
						return
					}
				}
				fmt.Fprintf(w, "chunk %d from %s\n", i, name)
				w.(http.Flusher).Flush()
			}
		case strings.HasSuffix(r.URL.Path, "/ws"):
			echo(w, r, name)
		case next == "":
			fmt.Fprintf(w, "%s[uid=%s]", name, r.Header.Get("uid"))
		default:
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+next+"/orders/of"+r.URL.Path, nil)
			resp, err := client.Do(req)
			if err != nil {
				http.Error(w, name+" > "+err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			fmt.Fprintf(w, "%s > %s", name, b)
		}
	})
}

// echo switches the connection to a line echo protocol ("Upgrade: echo"),
// as a WebSocket server switches after its handshake.
func echo(w http.ResponseWriter, r *http.Request, name string) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "echo") {
		http.Error(w, "upgrade to echo required", http.StatusUpgradeRequired)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	if err := rw.Flush(); err != nil {
		return
	}
	sc := bufio.NewScanner(rw)
	for sc.Scan() {
		fmt.Fprintf(rw, "%s echo: %s\n", name, sc.Text())
		if err := rw.Flush(); err != nil {
			return
		}
	}
}

// check sends one request per case and checks the instances that served it.
func check(d *demo, out io.Writer) error {
	for _, c := range []struct {
		title, token, gray, want string
	}{
		{"anonymous", "", "", "user-prod > order-prod"},
		{"alice (a gray user)", "t-alice", "", "user-gray > order-gray"},
		{"bob, gray: true (untrusted: dropped)", "t-bob", "true", "user-prod > order-prod"},
		{"qa, gray: true (trusted)", "t-qa", "true", "user-gray > order-gray"},
	} {
		req, _ := http.NewRequest(http.MethodGet, d.url+"/users/1", nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.gray != "" {
			req.Header.Set("gray", c.gray)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(out, "%-38s -> %s\n", c.title, b)
		if !strings.HasPrefix(string(b), c.want) {
			return fmt.Errorf("%s: got %q, want prefix %q", c.title, b, c.want)
		}
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
