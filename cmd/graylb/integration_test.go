package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/redisrules"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The integration tests run the command against real parts: a Prometheus
// server (the Debian package's binary, run here on loopback with a
// configuration of the test's own, scraping every second), Redis
// (redis-server, started here) and Nacos (GRAYLB_NACOS_ADDR, which make
// test starts), and callers built with graylb whose otelgraylb call metrics
// the Prometheus exporter serves on /metrics. They skip under -race (the
// callers of the Nacos test run nacos-sdk-go, which races inside its RPC
// client; make test runs them without -race) and, outside CI, when a part
// is missing; under CI (CI=true) a missing part fails them.

const releasedService = "user-service"

// startPrometheus runs a Prometheus server scraping targets every second
// and returns its base URL.
func startPrometheus(t *testing.T, targets ...string) string {
	t.Helper()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n" +
		"scrape_configs:\n  - job_name: callers\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n" +
		"    static_configs:\n      - targets: [" + strings.Join(quoted, ", ") + "]\n"
	base := startPrometheusWith(t, cfg, "")
	// A rollout starts on callers Prometheus scrapes already, as in
	// production: a caller first scraped in a step counts only what its
	// series grow by after that (see grown).
	q := "count(count by (instance) (" + defaultMetric + "_count))"
	p := &prometheus{base: base, client: &http.Client{Timeout: 5 * time.Second}}
	eventually(t, 30*time.Second, "prometheus has scraped the callers' metrics", func() bool {
		n, err := p.query(context.Background(), q, "", time.Time{})
		return err == nil && n[""] == float64(len(targets))
	})
	return base
}

// startPrometheusWith runs a Prometheus server with configuration cfg on
// the data in dataDir (a new folder when empty) and returns its base URL.
func startPrometheusWith(t *testing.T, cfg, dataDir string) string {
	t.Helper()
	bin := need(t, "prometheus", "prometheus")
	dir := t.TempDir()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+dataDir,
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited at start-up:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus on %s not ready within 60s:\n%s", addr, log)
		}
	}
}

// backend is one instance of the released service: it answers 500 to
// errEvery-th request (0: never).
type backend struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func startBackend(t *testing.T, errEvery int64) *backend {
	b := &backend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.calls.Add(1)
		if errEvery > 0 && n%errEvery == 0 {
			http.Error(w, "gray build failure", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) hostPort(t *testing.T) (string, int) {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// caller is a service that calls the released one through graylb and
// serves its otelgraylb metrics on /metrics.
type caller struct {
	lb      *graylb.LoadBalancer
	metrics string // host:port of /metrics
	ok, bad atomic.Int64
}

// startCaller builds a caller over sup and rules, and sends requests from
// random users until the test ends.
func startCaller(t *testing.T, sup graylb.Supplier, rules graylb.RuleSource) *caller {
	t.Helper()
	return startCallerWith(t, sup, rules, 2)
}

// startCallerWith is startCaller with workers sending requests at once.
func startCallerWith(t *testing.T, sup graylb.Supplier, rules graylb.RuleSource, workers int) *caller {
	t.Helper()
	return startCallerOf(t, sup, rules, workers, false)
}

// startCallerOf is startCallerWith; an observed caller also has outlier
// detection at its defaults and otelgraylb's picks (Observer) and state
// (Register) metrics, the ejected gray instances among them.
func startCallerOf(t *testing.T, sup graylb.Supplier, rules graylb.RuleSource, workers int, observed bool) *caller {
	t.Helper()
	reg := promclient.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	meter := mp.Meter(otelgraylb.ScopeName)
	rec, err := otelgraylb.CallObserver(meter)
	if err != nil {
		t.Fatal(err)
	}
	opts := []graylb.Option{graylb.WithRuleSource(rules), graylb.WithCallObserver(rec)}
	if observed {
		picks, err := otelgraylb.Observer(meter)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, graylb.WithObserver(picks), graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	}
	lb, err := graylb.New(sup, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	if observed {
		mreg, err := otelgraylb.Register(meter, lb)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mreg.Unregister() })
	}
	client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 5 * time.Second}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	msrv := httptest.NewServer(mux)
	t.Cleanup(msrv.Close)
	c := &caller{lb: lb, metrics: strings.TrimPrefix(msrv.URL, "http://")}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+releasedService+"/", nil)
				req.Header.Set(graylb.DefaultUserHeader, "user-"+strconv.Itoa(rand.IntN(1_000_000)))
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						c.ok.Add(1)
					} else {
						c.bad.Add(1)
					}
				} else if ctx.Err() == nil {
					c.bad.Add(1)
				}
				select {
				case <-ctx.Done():
				case <-time.After(4 * time.Millisecond):
				}
			}
		}()
	}
	return c
}

// rolloutRun runs graylb rollout in this process, as the command line
// does, and returns its exit code and output.
func rolloutRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	code := run(ctx, args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(string) string { return "" }, http: &http.Client{}})
	t.Logf("graylb %s\nexit %d after %s\n%s%s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), errOut.String(), out.String())
	return code, out.String(), errOut.String()
}

// rolloutFlagsFor are short steps: a few seconds each.
func rolloutFlagsFor(prom string) []string {
	return []string{"rollout", "--service", releasedService, "--prometheus", prom,
		"--steps", "10,50,100", "--interval", "4s", "--poll", "1s", "--window", "5s",
		"--min-requests", "30", "--max-wait", "60s"}
}

// registerPersistent registers a prod and a gray instance of service in
// group of the Nacos server at addr, as persistent instances (no client
// keeps them alive), until the test ends.
func registerPersistent(t *testing.T, addr, group, service string) {
	t.Helper()
	for i, md := range []string{`{}`, `{"gray":"true"}`} {
		form := url.Values{"serviceName": {service}, "groupName": {group}, "ip": {"127.0.0.1"}, "port": {strconv.Itoa(9001 + i)},
			"ephemeral": {"false"}, "metadata": {md}, "weight": {"1"}, "healthy": {"true"}, "enabled": {"true"}}
		resp, err := http.PostForm("http://"+addr+"/nacos/v1/ns/instance", form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("registering %s in %s: %d %s", service, group, resp.StatusCode, body)
		}
		t.Cleanup(func() {
			req, _ := http.NewRequest(http.MethodDelete, "http://"+addr+"/nacos/v1/ns/instance?"+form.Encode(), nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
}

// integration skips the test under -race (see above).
func integration(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("integration test skipped under -race: its Nacos callers run nacos-sdk-go, which races inside its RPC client; make test runs it without -race")
	}
}

// nacosAddr returns GRAYLB_NACOS_ADDR; without it the test skips, or
// fails under CI.
func nacosAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		msg := "no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " — under CI it must run")
		}
		t.Skip(msg)
	}
	return addr
}

// eventually waits up to d for cond, polled every 50 ms, failing with
// what it waited for.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(d); !cond(); {
		select {
		case <-tick.C:
		case <-deadline:
			if !cond() {
				t.Fatalf("%s: not within %s", what, d)
			}
			return
		}
	}
}

func TestIntegration_RolloutRedis(t *testing.T) {
	integration(t)
	for _, tc := range []struct {
		name     string
		errEvery int64 // the gray build fails every errEvery-th request
		code     int
		canary   float64
		closed   bool
	}{
		{"gray answers 20% errors: rolled back within one step", 5, exitRollback, 10, true},
		{"healthy gray reaches 100%", 0, exitOK, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t)
			key := "{graylb}:rules"
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			rdb.Set(context.Background(), key, `{"grayUsers": ["qa-1"]}`, 0)
			reg, registry := graylb.NewRegistry(), newFakeNacos(t)
			for i, b := range []*backend{startBackend(t, 0), startBackend(t, 0), startBackend(t, tc.errEvery)} {
				host, port := b.hostPort(t)
				md := map[string]string{}
				if i == 2 {
					md["gray"] = "true"
				}
				in := graylb.NewInstance(releasedService, host, port, md)
				if err := reg.Register(in); err != nil {
					t.Fatal(err)
				}
				registry.mirror(in)
			}
			src, err := redisrules.New(rdb, redisrules.WithDocument(key), redisrules.WithPollInterval(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			c := startCaller(t, reg, src)
			prom := startPrometheus(t, c.metrics)

			// Steps shorter than two scrapes are refused, as Prometheus' targets
			// give the callers' scrape interval, before anything is written.
			code, out, errOut := rolloutRun(t, append(rolloutFlagsFor(prom), "--redis", addr, "--nacos", registry.addr(), "--interval", "1500ms")...)
			if code != exitUsage || !strings.Contains(out, `scraped every 1s (job="callers", instance="`+c.metrics+`")`) {
				t.Fatalf("a step of 1.5s over callers scraped every second: exit %d, want 2 saying why:\n%s%s", code, out, errOut)
			}
			code, out, errOut = rolloutRun(t, append(rolloutFlagsFor(prom), "--redis", addr, "--nacos", registry.addr())...)
			if strings.Contains(errOut, "cannot tell how often") {
				t.Errorf("the scrape interval was not read from Prometheus:\n%s", errOut)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tc.code, out, errOut)
			}
			if tc.closed && strings.Count(errOut, "canary 10% set") != 1 || strings.Contains(errOut, "canary 50% set") && tc.closed {
				t.Fatalf("not rolled back within the first step:\n%s", errOut)
			}
			// The rules where the command says, read back from Redis as a
			// client reads them, and in force in the caller.
			got, err := clientsSee(t, addr, redisrules.WithDocument(key))
			if err != nil {
				t.Fatal(err)
			}
			if got.Closed != tc.closed || got.CanaryPercent != tc.canary || len(got.GrayUsers) != 1 {
				t.Fatalf("Redis holds %+v, want closed %t at canary %v with the gray users kept", got, tc.closed, tc.canary)
			}
			if !strings.Contains(out, fmt.Sprintf("canary %v%%", tc.canary)) {
				t.Fatalf("the output does not say where the rules are:\n%s", out)
			}
			eventually(t, 10*time.Second, "the caller follows the rules", func() bool {
				r := c.lb.RulesState().Rules
				return r.Closed == tc.closed && r.CanaryPercent == tc.canary
			})
			t.Logf("caller: %d ok, %d failed requests", c.ok.Load(), c.bad.Load())
		})
	}
}

func TestIntegration_RolloutNacos(t *testing.T) {
	integration(t)
	addr := nacosAddr(t)
	for _, tc := range []struct {
		name     string
		errEvery int64
		code     int
		canary   float64
		closed   bool
	}{
		{"gray answers 20% errors: rolled back within one step", 5, exitRollback, 10, true},
		{"healthy gray reaches 100%", 0, exitOK, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// A group of the test's own: nothing else reads or writes it.
			group := fmt.Sprintf("graylb-cmd-%d", time.Now().UnixNano())
			opts := []nacos.Option{nacos.WithServers(addr), nacos.WithGroup(group),
				nacos.WithCacheDir(t.TempDir()), nacos.WithLogDir(t.TempDir()), nacos.WithoutDiskCacheAtStart()}
			for i, b := range []*backend{startBackend(t, 0), startBackend(t, 0), startBackend(t, tc.errEvery)} {
				host, port := b.hostPort(t)
				gray := i == 2
				r, err := nacos.Register(ctx, nacos.Service{Name: releasedService, Host: host, Port: port, Gray: &gray, Version: "v" + strconv.Itoa(i)}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
			}
			g := []string{"--nacos", addr, "--group", group}
			if code, out, errOut := runCLI(t, nil, append([]string{"rules", "apply", writeFile(t, `{"grayUsers": ["qa-1"]}`)}, g...)...); code != 0 {
				t.Fatalf("apply: exit %d: %s%s", code, out, errOut)
			}
			sup, err := nacos.NewSupplier(opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sup.Close() })
			src, err := nacos.NewRuleSource("", opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { src.Close() })
			c := startCaller(t, sup, src)
			eventually(t, 20*time.Second, "the caller sees the 3 instances", func() bool {
				s, ok := c.lb.Snapshot(releasedService)
				return ok && s.Prod == 2 && s.Gray == 1
			})
			code, out, errOut := runCLI(t, nil, append([]string{"status", releasedService}, g...)...)
			if code != 0 || !strings.Contains(out, "2 prod, 1 gray routable") || !strings.Contains(out, "metadata") {
				t.Fatalf("status: exit %d:\n%s%s", code, out, errOut)
			}
			t.Logf("graylb status %s:\n%s", releasedService, out)
			prom := startPrometheus(t, c.metrics)

			code, out, errOut = rolloutRun(t, append(rolloutFlagsFor(prom), g...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tc.code, out, errOut)
			}
			if tc.closed && strings.Contains(errOut, "canary 50% set") {
				t.Fatalf("not rolled back within the first step:\n%s", errOut)
			}
			// Read back from Nacos by a client's RuleSource.
			check, err := nacos.NewRuleSource("", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer check.Close()
			eventually(t, 20*time.Second, "Nacos holds the rules the command says", func() bool {
				got, err := check.Load(ctx)
				return err == nil && got.Closed == tc.closed && got.CanaryPercent == tc.canary && len(got.GrayUsers) == 1
			})
			eventually(t, 20*time.Second, "the caller follows the rules", func() bool {
				r := c.lb.RulesState().Rules
				return r.Closed == tc.closed && r.CanaryPercent == tc.canary
			})
			t.Logf("caller: %d ok, %d failed requests", c.ok.Load(), c.bad.Load())
		})
	}
}
