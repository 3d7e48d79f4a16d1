package nacos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/httpctx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fragment appends a row to the folder named by GRAYLB_RELIABILITY_OUT
// (make test-reliability gathers them into RELIABILITY.md).
func fragment(t *testing.T, name, text string) {
	t.Log(text)
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644))
	}
}

// scriptTimeout bounds one run of scripts/nacos.sh (its own waits are
// bounded too; this catches anything they miss).
const scriptTimeout = 3 * time.Minute

func script(t *testing.T) func(args ...string) {
	t.Helper()
	s := os.Getenv("GRAYLB_NACOS_SCRIPT")
	if s == "" {
		t.Skip("set GRAYLB_NACOS_SCRIPT to scripts/nacos.sh to run the chaos tests (make test does)")
	}
	return func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, s, args...).CombinedOutput()
		require.NoError(t, err, "scripts/nacos.sh %s (bounded by %v): %s", strings.Join(args, " "), scriptTimeout, out)
	}
}

// restartServer runs "scripts/nacos.sh start" at cleanup, bounded.
func restartServer(t *testing.T) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
		defer cancel()
		exec.CommandContext(ctx, os.Getenv("GRAYLB_NACOS_SCRIPT"), "start").Run()
	})
}

// registerTimeout bounds every registration in the tests.
const registerTimeout = 15 * time.Second

// backend is an HTTP instance registered in Nacos through its own client.
type backend struct {
	name string
	srv  *httptest.Server
	reg  *Registration
}

func startBackend(t *testing.T, service, name string, gray bool, servers ...string) *backend {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	dir := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	var reg *Registration
	var err error
	// A registration right after a server (re)start can find it still
	// starting: tried again every 100 ms.
	poll(registerTimeout, 100*time.Millisecond, func() bool {
		reg, err = Register(ctx, Service{Name: service, Host: "127.0.0.1", Port: port, Gray: &gray},
			WithServers(servers...), WithCacheDir(dir), WithLogDir(dir), WithLogLevel("error"))
		return err == nil || ctx.Err() != nil
	})
	require.NoError(t, err, "registering %s within %v", name, registerTimeout)
	t.Cleanup(func() { reg.Close() })
	return &backend{name: name, srv: srv, reg: reg}
}

// load sends requests through the graylb RoundTripper at a bounded rate
// (about 100 a second, loopback only) until stopped, alternating gray and
// prod, and counts failures and wrong-kind answers.
type load struct {
	client                  *http.Client
	service                 string
	sent, failed, wrongKind atomic.Int64 // wrongKind: a prod request answered by gray
	fellBack                atomic.Int64 // a gray request answered by prod (no gray instance listed then)
	answeredBy              sync.Map     // the name of every backend that answered a request, load or poll
	firstErr                atomic.Value
	stop                    chan struct{}
	done                    sync.WaitGroup
}

func newLoad(client *http.Client, service string) *load {
	return &load{client: client, service: service, stop: make(chan struct{})}
}

func (l *load) start() {
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			gray := i%2 == 0
			got, err := l.get(gray)
			l.sent.Add(1)
			if err != nil {
				if l.failed.Add(1) == 1 {
					l.firstErr.Store(err.Error())
				}
				continue
			}
			switch {
			case !gray && strings.HasPrefix(got, "gray"):
				l.wrongKind.Add(1)
			case gray && !strings.HasPrefix(got, "gray"):
				l.fellBack.Add(1)
			}
		}
	}()
}

func (l *load) get(gray bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.service+"/", nil)
	req.Header.Set("gray", fmt.Sprint(gray))
	resp, err := l.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		l.answeredBy.Store(string(b), true)
	}
	return string(b), err
}

func (l *load) finish() { close(l.stop); l.done.Wait() }

// waitSent waits until the load sent n more requests (about 100 a second).
func (l *load) waitSent(t *testing.T, n int64) {
	t.Helper()
	want := l.sent.Load() + n
	require.Eventually(t, func() bool { return l.sent.Load() >= want }, time.Minute, 10*time.Millisecond, "%d requests of the load", n)
}

func newHTTPClient(t *testing.T, servers ...string) (*http.Client, *graylb.LoadBalancer) {
	t.Helper()
	dir := sdkDir(t)
	sup, err := NewSupplier(WithServers(servers...), WithCacheDir(dir), WithLogDir(dir), WithLogLevel("error"))
	require.NoError(t, err)
	lb, err := graylb.New(sup, graylb.WithContextHandler(httpctx.Handler()))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close(); sup.Close() })
	return &http.Client{Transport: httpctx.NewTransport(lb)}, lb
}

// waitRouted polls requests of name's kind until one, the load's or its
// own, is answered by name. The load's count too: its gray requests come
// every 20 ms, as the polls do, and a round robin over two gray instances
// can answer every poll from the same one while the load gets the other.
func waitRouted(t *testing.T, l *load, name string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	gray := strings.HasPrefix(name, "gray")
	routed := func() bool { _, ok := l.answeredBy.Load(name); return ok }
	if !poll(within, 20*time.Millisecond, func() bool { l.get(gray); return routed() }) {
		t.Fatalf("%s not routed to within %v", name, within)
	}
	return time.Since(start)
}

// TestIntegration_ChaosHTTP: steady load through the HTTP RoundTripper
// while the Nacos server is killed (SIGKILL) and restarted.
func TestIntegration_ChaosHTTP(t *testing.T) {
	addr := nacosAddr(t)
	ctl := script(t)
	restartServer(t)
	svc := uniqueService(t)
	startBackend(t, svc, "prod-1", false, addr)
	startBackend(t, svc, "prod-2", false, addr)
	startBackend(t, svc, "gray-1", true, addr)
	client, lb := newHTTPClient(t, addr)
	l := newLoad(client, svc)
	waitRouted(t, l, "gray-1", 10*time.Second) // the service is visible: start the load
	waitRouted(t, l, "prod-1", 10*time.Second)
	waitRouted(t, l, "prod-2", 10*time.Second)
	l.start()
	l.waitSent(t, 100) // the load's steady state before the fault
	before := l.sent.Load()

	ctl("stop", "-9")
	time.Sleep(3 * time.Second) // must sleep: the outage's length is the scenario (the fragment says 3 s)
	ctl("start")
	restarted := time.Now()
	// A new gray instance registers after the restart; gray requests then
	// go to gray-1 and gray-2 in turn.
	startBackend(t, svc, "gray-2", true, addr)
	recovery := waitRouted(t, l, "gray-2", 30*time.Second) // from its registration
	sinceRestart := time.Since(restarted)
	l.waitSent(t, 100) // the load after the recovery
	l.finish()
	st := adapter.For(lb).Cache().Stats()
	fragment(t, "chaos-http", fmt.Sprintf(
		"| chaos: Nacos SIGKILLed, down 3 s, restarted; load through the HTTP RoundTripper | standalone r-nacos | %d requests (%d from the kill on) | — | %d failed requests | %d prod on gray, %d gray on prod | a new registration routed %v after the restart (%v after registering); %d partial lists held while the registry refilled, %d empty ones refused |\n",
		l.sent.Load(), l.sent.Load()-before, l.failed.Load(), l.wrongKind.Load(), l.fellBack.Load(), sinceRestart.Round(10*time.Millisecond), recovery.Round(10*time.Millisecond), st.HeldShrinks, st.RefusedEmpty))
	if v := l.firstErr.Load(); v != nil {
		t.Errorf("first failure: %v", v)
	}
	assert.Zero(t, l.failed.Load(), "failed requests while the last good list exists")
	assert.Zero(t, l.wrongKind.Load(), "prod requests answered by gray")
	assert.Zero(t, l.fellBack.Load(), "gray requests stay on gray while the registry refills (its first lists may lack gray-1)")
	assert.Less(t, sinceRestart, 5*time.Second, "a registration after the restart is routed to within 5s")
}

// clusterNodes returns the addresses of scripts/nacos.sh's cluster nodes:
// HTTP ports from the standalone port + 10000, 10 apart.
func clusterNodes(t *testing.T, addr string, n int) []string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	out := make([]string, n)
	for i := range out {
		out[i] = net.JoinHostPort(host, strconv.Itoa(p+10000+10*i))
	}
	return out
}

// TestIntegration_Cluster: three Nacos nodes; the supplier has all their
// addresses; one node stops under load.
func TestIntegration_Cluster(t *testing.T) {
	addr := nacosAddr(t)
	ctl := script(t)
	ctl("cluster-start", "3")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
		defer cancel()
		exec.CommandContext(ctx, os.Getenv("GRAYLB_NACOS_SCRIPT"), "cluster-stop", "3", "-9").Run()
	})
	nodes := clusterNodes(t, addr, 3)
	svc := uniqueService(t)
	startBackend(t, svc, "prod-1", false, nodes...)
	startBackend(t, svc, "gray-1", true, nodes...)
	client, lb := newHTTPClient(t, nodes...)
	l := newLoad(client, svc)
	// What a raw Supplier (no Cache) sees while the node is lost: does a
	// client on a surviving node see the lost node's instances vanish?
	raw, err := NewSupplier(testOptsServers(t, nodes...)...)
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	var seenMu sync.Mutex
	var seen []string
	var stoppedAt atomic.Int64
	stopRaw, err := raw.Watch(svc, func(list []graylb.Instance) {
		var at time.Duration
		if s := stoppedAt.Load(); s != 0 {
			at = time.Since(time.Unix(0, s)).Round(10 * time.Millisecond)
		}
		seenMu.Lock()
		seen = append(seen, fmt.Sprintf("%v: %d instances", at, len(list)))
		seenMu.Unlock()
	})
	require.NoError(t, err)
	t.Cleanup(stopRaw)
	// A new cluster takes a while to form and share registrations: start
	// the load once both instances are routed to.
	waitRouted(t, l, "gray-1", 30*time.Second)
	waitRouted(t, l, "prod-1", 30*time.Second)
	l.start()
	l.waitSent(t, 100) // the load's steady state before the fault

	stopped := time.Now()
	stoppedAt.Store(stopped.UnixNano())
	ctl("cluster-node-stop", "1")
	time.Sleep(2 * time.Second) // must sleep: the node has been gone 2 s when the registration comes (the scenario)
	startBackend(t, svc, "gray-2", true, nodes[1:]...)
	routed := waitRouted(t, l, "gray-2", 30*time.Second)
	l.waitSent(t, 100) // the load after the new registration
	l.finish()
	seenMu.Lock()
	t.Logf("lists a raw supplier saw (time since the node stop): %v; refill window open until %v after the stop",
		seen, raw.RefillUntil().Sub(stopped).Round(10*time.Millisecond))
	seenMu.Unlock()
	st := adapter.For(lb).Cache().Stats()
	fragment(t, "cluster", fmt.Sprintf(
		"| cluster: node 1 of 3 SIGKILLed under load; the supplier has all 3 addresses | 3 r-nacos nodes (raft) | %d requests | — | %d failed requests | %d prod on gray, %d gray on prod | a registration after the stop routed %v after registering (%v after the stop); %d partial lists held |\n",
		l.sent.Load(), l.failed.Load(), l.wrongKind.Load(), l.fellBack.Load(), routed.Round(10*time.Millisecond), time.Since(stopped).Round(10*time.Millisecond), st.HeldShrinks))
	if v := l.firstErr.Load(); v != nil {
		t.Errorf("first failure: %v", v)
	}
	assert.Zero(t, l.failed.Load())
	assert.Zero(t, l.wrongKind.Load(), "prod requests answered by gray")
}
