package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/redisrules"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

const (
	releasedService = "user-service"
	rulesKey        = "{graylb}:rules"
)

// graylbBin is the command, built once for the package's tests.
var graylbBin string

func TestMain(m *testing.M) {
	if _, err := os.Stat(filepath.Join("..", "main.go")); err != nil {
		// Not in the repository (a copy of this module fetched from a tag):
		// the command's source is not beside it, and the tests skip.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "graylb-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	graylbBin = filepath.Join(dir, "graylb")
	build := exec.Command("go", "build", "-o", graylbBin, ".")
	build.Dir = ".."
	// Built against the command's own go.mod: GOFLAGS (a -modfile for
	// this module, scripts/inmodule.sh sets one) is not passed on.
	build.Env = []string{"GOWORK=off"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOWORK=") {
			build.Env = append(build.Env, kv)
		}
	}
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the graylb command: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needCommand skips the test where the command could not be built from
// its source beside this module (a copy fetched from a tag has none).
func needCommand(t testing.TB) {
	t.Helper()
	if graylbBin == "" {
		t.Skip("the graylb command's source is not beside this module: skipping the rollout end to end")
	}
}

// need skips the test when a program it runs is not installed, except
// under CI (CI=true), where a missing program fails it.
func need(t testing.TB, program string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err == nil {
		return p
	}
	msg := program + " is not installed: skipping a test against a real one"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " — under CI it must run")
	}
	t.Skip(msg)
	return ""
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis starts a redis-server of the test's own and returns its
// address.
func startRedis(t testing.TB) string {
	t.Helper()
	need(t, "redis-server")
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	waitFor(t, 20*time.Second, "redis-server answers on "+addr, func() bool { return c.Ping(context.Background()).Err() == nil })
	return addr
}

// startPrometheus runs a Prometheus server scraping targets every second
// and returns its base URL.
func startPrometheus(t testing.TB, targets ...string) string {
	t.Helper()
	bin := need(t, "prometheus")
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n" +
		"scrape_configs:\n  - job_name: callers\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n" +
		"    static_configs:\n      - targets: [" + strings.Join(quoted, ", ") + "]\n"
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
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
	})
	base := "http://" + addr
	waitFor(t, 60*time.Second, "prometheus ready on "+addr, func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	// A rollout starts on callers Prometheus scrapes already, as in
	// production: the rollout counts only what the series of a caller first
	// scraped in a step grow by after that.
	q := url.Values{"query": {"count(count by (instance) (graylb_client_call_duration_seconds_count))"}}.Encode()
	waitFor(t, 30*time.Second, "prometheus has scraped the callers' metrics", func() bool {
		resp, err := http.Get(base + "/api/v1/query?" + q)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var ans struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&ans) != nil || len(ans.Data.Result) != 1 {
			return false
		}
		return ans.Data.Result[0].Value[1] == strconv.Itoa(len(targets))
	})
	return base
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
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

// observedLB is a caller's LoadBalancer over sup, following the rules in
// Redis at addr, its calls observed by otelgraylb's CallObserver, whose
// metrics a Prometheus exporter serves; it returns the /metrics address.
func observedLB(t testing.TB, sup graylb.Supplier, redisAddr string) (*graylb.LoadBalancer, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	src, err := redisrules.New(rdb, redisrules.WithDocument(rulesKey), redisrules.WithPollInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	reg := promclient.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	rec, err := otelgraylb.CallObserver(mp.Meter(otelgraylb.ScopeName))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := graylb.New(sup, graylb.WithRuleSource(src), graylb.WithCallObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	msrv := httptest.NewServer(mux)
	t.Cleanup(msrv.Close)
	return lb, strings.TrimPrefix(msrv.URL, "http://")
}

// registryOf serves the instances of service in sup as Nacos' instance
// API does (the service list and the instance list, persistent instances),
// for the command's rollout, which reads the registry; the callers here
// take their instances from graylb's in-memory registry. It returns its
// host:port.
func registryOf(t testing.TB, sup graylb.Supplier, service string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/nacos/v1/ns/service/list":
			json.NewEncoder(w).Encode(map[string]any{"count": 1, "doms": []string{service}})
		case "/nacos/v1/ns/instance/list":
			type host struct {
				IP       string            `json:"ip"`
				Port     int               `json:"port"`
				Weight   float64           `json:"weight"`
				Healthy  bool              `json:"healthy"`
				Enabled  bool              `json:"enabled"`
				Metadata map[string]string `json:"metadata"`
			}
			hosts := []host{}
			if r.URL.Query().Get("serviceName") == service {
				list, err := sup.Instances(r.Context(), service)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				for _, in := range list {
					hosts = append(hosts, host{in.Host, in.Port, in.Weight, in.Healthy, in.Enabled, in.Metadata})
				}
			}
			json.NewEncoder(w).Encode(map[string]any{"hosts": hosts})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// rollout runs the graylb command's rollout of service (as the callers'
// metrics name it) against the rules in Redis, the instances in the
// registry at registry (see registryOf), and returns its exit code and
// output.
func rollout(t testing.TB, service, redisAddr, registry, prom string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, graylbBin, "rollout", "--service", service, "--prometheus", prom,
		"--steps", "10,50,100", "--interval", "4s", "--poll", "1s", "--window", "5s",
		"--min-requests", "30", "--max-wait", "60s", "--redis", redisAddr, "--redis-key", rulesKey, "--nacos", registry)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("graylb rollout: exit %d after %s\n%s%s", code, time.Since(start).Round(time.Millisecond), errOut.String(), out.String())
	return code, out.String(), errOut.String()
}

// storedRules reads the rules as a client with redisrules does.
func storedRules(t testing.TB, redisAddr string) graylb.Rules {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer c.Close()
	src, err := redisrules.New(c, redisrules.WithDocument(rulesKey), redisrules.WithNotifications(redisrules.NotifyOff))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := src.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rolloutCases are the two outcomes every caller kind is run through.
var rolloutCases = []struct {
	name     string
	errEvery int64 // the gray build fails every errEvery-th call (0: never)
	code     int
	canary   float64
	closed   bool
}{
	{"gray answers 20% errors: rolled back within one step", 5, 3, 10, true},
	{"healthy gray reaches 100%", 0, 0, 100, false},
}

// checkOutcome holds the rollout's result and the rules it left.
func checkOutcome(t testing.TB, redisAddr string, code int, errOut string, wantCode int, canary float64, closed bool, lb *graylb.LoadBalancer) {
	t.Helper()
	if code != wantCode {
		t.Fatalf("exit %d, want %d", code, wantCode)
	}
	if closed && strings.Contains(errOut, "canary 50% set") {
		t.Fatalf("not rolled back within the first step:\n%s", errOut)
	}
	got := storedRules(t, redisAddr)
	if got.Closed != closed || got.CanaryPercent != canary || len(got.GrayUsers) != 1 {
		t.Fatalf("Redis holds %+v, want closed %t at canary %v with the gray users kept", got, closed, canary)
	}
	waitFor(t, 10*time.Second, "the caller follows the rules", func() bool {
		r := lb.RulesState().Rules
		return r.Closed == closed && r.CanaryPercent == canary
	})
}
