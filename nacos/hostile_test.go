package nacos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIntegration_DeliberateDeregistration: every prod instance is
// deregistered on purpose while the registry is settled; prod requests
// stop reaching them at the next push, not after a settle period.
func TestIntegration_DeliberateDeregistration(t *testing.T) {
	addr := nacosAddr(t)
	svc := uniqueService(t)
	p1 := startBackend(t, svc, "prod-1", false, addr)
	p2 := startBackend(t, svc, "prod-2", false, addr)
	startBackend(t, svc, "gray-1", true, addr)
	client, lb := newHTTPClient(t, addr)
	l := newLoad(client, svc)
	waitRouted(t, l, "gray-1", 10*time.Second)
	waitRouted(t, l, "prod-1", 10*time.Second)
	waitRouted(t, l, "prod-2", 10*time.Second)

	start := time.Now()
	require.NoError(t, p1.reg.Close())
	require.NoError(t, p2.reg.Close())
	stale := 0
	var err error
	poll(15*time.Second, time.Millisecond, func() bool {
		if _, err = lb.Pick(prodCtx, svc); err != nil {
			return true
		}
		stale++
		return false
	})
	took := time.Since(start)
	require.ErrorIs(t, err, graylb.ErrNoInstance, "prod picks fail once every prod instance is deregistered")
	fragment(t, "hostile-08-deregister", fmt.Sprintf(
		"| 8. deliberate deregistration of every prod instance (settled registry) | TestIntegration_DeliberateDeregistration | 1 run: %d prod picks reached the deregistered instances before the push applied, %v after the deregistration | 0 |\n",
		stale, took.Round(10*time.Millisecond)))
	assert.Less(t, took, 3*time.Second, "applied at the next push (r-nacos pushes within 0.5-1 s), not after a settle period")
	in, err := lb.Pick(grayCtx, svc)
	require.NoError(t, err)
	assert.Equal(t, "true", in.Metadata["gray"])
}

// udpPorts lists the UDP ports this process listens on (IPv4 and IPv6):
// the sockets of /proc/self/net/udp{,6} whose inodes are open in
// /proc/self/fd.
func udpPorts(t *testing.T) (v4, v6 []int) {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc: cannot list this process's UDP ports")
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	read := func(path string) []int {
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		var out []int
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || !inodes[fields[9]] {
				continue
			}
			local := fields[1]
			p, err := strconv.ParseUint(local[strings.LastIndexByte(local, ':')+1:], 16, 16)
			if err == nil {
				out = append(out, int(p))
			}
		}
		return out
	}
	return read("/proc/self/net/udp"), read("/proc/self/net/udp6")
}

// forgedPush is the datagram nacos-sdk-go's UDP push receiver accepts
// from anyone: a service list with a huge lastRefTime that pins it.
func forgedPush(t *testing.T, service string, hosts []model.Instance) []byte {
	t.Helper()
	const pinned = int64(9e18)
	data, err := json.Marshal(model.Service{Name: service, GroupName: "DEFAULT_GROUP", LastRefTime: uint64(pinned), Hosts: hosts, Valid: true})
	require.NoError(t, err)
	msg, err := json.Marshal(map[string]any{"type": "service", "data": string(data), "lastRefTime": pinned})
	require.NoError(t, err)
	return msg
}

// TestIntegration_ForgedUDPPush: a forged registry push sent to every UDP
// port this process listens on changes no routing; genuine updates are
// still followed.
func TestIntegration_ForgedUDPPush(t *testing.T) {
	addr := nacosAddr(t)
	svc := uniqueService(t)
	prod := startBackend(t, svc, "prod-1", false, addr)
	gray := startBackend(t, svc, "gray-1", true, addr)
	var hits atomic.Int64
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "attacker")
	}))
	t.Cleanup(attacker.Close)
	client, _ := newHTTPClient(t, addr)
	l := newLoad(client, svc)
	waitRouted(t, l, "gray-1", 10*time.Second)
	waitRouted(t, l, "prod-1", 10*time.Second)

	// A plain SDK naming client in the same process shows the datagram
	// works: its receiver takes it into the SDK's cache.
	sdk := newNaming(t)
	require.NoError(t, sdk.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: func([]model.Instance, error) {}}))

	port := func(s *httptest.Server) uint64 { return uint64(s.Listener.Addr().(*net.TCPAddr).Port) }
	msg := forgedPush(t, svc, []model.Instance{
		{Ip: "127.0.0.1", Port: port(attacker), Weight: 100, Healthy: true, Enable: true, Metadata: map[string]string{"gray": "false"}},
		{Ip: "127.0.0.1", Port: port(gray.srv), Weight: 1, Healthy: true, Enable: true, Metadata: map[string]string{"gray": "false"}}, // gray relabelled prod
	})
	v4, v6 := udpPorts(t)
	require.NotEmpty(t, append(v4, v6...), "the plain SDK client listens on UDP")
	l.start()
	send := func() {
		for _, p := range v4 {
			if c, err := net.Dial("udp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				c.Write(msg)
				c.Close()
			}
		}
		for _, p := range v6 {
			if c, err := net.Dial("udp6", net.JoinHostPort("::1", strconv.Itoa(p))); err == nil {
				c.Write(msg)
				c.Close()
			}
		}
	}
	send()
	require.Eventually(t, func() bool {
		hosts, _ := sdk.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: svc})
		for _, h := range hosts {
			if h.Port == port(attacker) {
				return true
			}
		}
		send()
		return false
	}, 10*time.Second, 100*time.Millisecond, "the forged datagram reaches the SDK's cache (else this test proves nothing)")
	l.waitSent(t, 200) // load runs on the supplier's lists meanwhile

	// A genuine update is still followed.
	startBackend(t, svc, "prod-2", false, addr)
	waitRouted(t, l, "prod-2", 10*time.Second)
	l.finish()
	_ = prod
	fragment(t, "hostile-06-forged-udp", fmt.Sprintf(
		"| 6. forged UDP registry push (lastRefTime 9e18, an attacker's address, the gray instance relabelled prod) sent to all %d UDP ports of the process | TestIntegration_ForgedUDPPush | %d requests | %d to the attacker, %d prod on gray, %d gray on prod, %d failed |\n",
		len(v4)+len(v6), l.sent.Load(), hits.Load(), l.wrongKind.Load(), l.fellBack.Load(), l.failed.Load()))
	assert.Zero(t, hits.Load(), "no request reaches the forged address")
	assert.Zero(t, l.wrongKind.Load(), "prod requests answered by gray")
	assert.Zero(t, l.fellBack.Load(), "gray requests answered by prod")
	assert.Zero(t, l.failed.Load())
}

// countFDs counts this process's open file descriptors.
func countFDs() int {
	fds, _ := os.ReadDir("/proc/self/fd")
	return len(fds)
}

// settled returns the goroutine and fd counts once the goroutines stop
// falling (or after 5 s).
func settled() (goroutines, fds int) {
	prev := -1
	poll(5*time.Second, 200*time.Millisecond, func() bool {
		runtime.GC()
		n := runtime.NumGoroutine()
		stopped := n == prev
		prev = n
		return stopped
	})
	return runtime.NumGoroutine(), countFDs()
}

// TestIntegration_CloseLeaks measures what one Client with a Supplier, a
// RuleSource and a Registration on it leaves behind after Close, and what
// the simple constructors (a Client each) leave.
func TestIntegration_CloseLeaks(t *testing.T) {
	addr := nacosAddr(t)
	svc := uniqueService(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The default logging: SDK lines to graylb's logger, no log files.
	opts := func() []Option {
		return []Option{WithServers(addr), WithCacheDir(sdkDir(t)), WithLogLevel("error")}
	}
	shared := func() {
		cl, err := NewClient(ctx, opts()...)
		require.NoError(t, err)
		sup, err := NewSupplier(WithClient(cl))
		require.NoError(t, err)
		src, err := NewRuleSource(svc+".json", WithClient(cl))
		require.NoError(t, err)
		reg, err := Register(ctx, Service{Name: svc, Host: "127.0.0.1", Port: 7401}, WithClient(cl))
		require.NoError(t, err)
		lb, err := graylb.New(sup, graylb.WithRuleSource(src))
		require.NoError(t, err)
		require.Eventually(t, func() bool { _, err := lb.Pick(grayCtx, svc); return err == nil }, 10*time.Second, 50*time.Millisecond)
		lb.Close()
		sup.Close()
		src.Close()
		reg.Close()
		cl.Close()
	}
	simple := func() {
		sup, err := NewSupplier(opts()...)
		require.NoError(t, err)
		src, err := NewRuleSource(svc+".json", opts()...)
		require.NoError(t, err)
		reg, err := Register(ctx, Service{Name: svc, Host: "127.0.0.1", Port: 7402}, opts()...)
		require.NoError(t, err)
		_, err = sup.Instances(ctx, svc)
		require.NoError(t, err)
		sup.Close()
		src.Close()
		reg.Close()
	}
	const rounds = 3
	measure := func(name string, cycle func()) (float64, float64) {
		cycle() // the SDK's process-wide state (logger, metrics) is built once
		g0, f0 := settled()
		for i := 0; i < rounds; i++ {
			cycle()
		}
		g1, f1 := settled()
		g, f := float64(g1-g0)/rounds, float64(f1-f0)/rounds
		t.Logf("%s: %+.1f goroutines and %+.1f fds per Close", name, g, f)
		return g, f
	}
	gs, fs := measure("shared Client (Supplier, RuleSource, Register)", shared)
	gp, fp := measure("simple constructors (a Client each)", simple)
	fragment(t, "hostile-10-leaks", fmt.Sprintf(
		"| 10. what one Close leaves (shared Client with a Supplier, RuleSource and Registration: %+.1f goroutines, %+.1f fds; simple constructors, a Client each: %+.1f goroutines, %+.1f fds) | TestIntegration_CloseLeaks | %d rounds each | — |\n",
		gs, fs, gp, fp, rounds))
	assert.LessOrEqual(t, gs, 0.5, "goroutines left per shared Client Close")
	assert.LessOrEqual(t, fs, 0.5, "fds left per shared Client Close")
	// The simple constructors left 0 to 1 goroutine per Close across full
	// integration passes (0 when run alone); not yet attributed.
	assert.LessOrEqual(t, gp, 1.5, "goroutines left per Close of the simple constructors")
	assert.LessOrEqual(t, fp, 0.5, "fds left per Close of the simple constructors")
}

// TestIntegration_UnreachableFailsFast: with no server, construction is
// bounded, the first pick fails with the cause, and the next ones fail at
// once. Needs no server; skipped under -race with the other SDK tests.
func TestIntegration_UnreachableFailsFast(t *testing.T) {
	if raceEnabled {
		t.Skip("uses the SDK, which races inside its RPC client; make test runs it without -race")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	dir := sdkDir(t)
	start := time.Now()
	sup, err := NewSupplier(WithServers(dead), WithCacheDir(dir), WithLogDir(dir), WithTimeout(time.Second), WithoutDiskCacheAtStart())
	require.NoError(t, err)
	defer sup.Close()
	built := time.Since(start)
	lb, err := graylb.New(sup)
	require.NoError(t, err)
	defer lb.Close()
	start = time.Now()
	_, err = lb.Pick(context.Background(), "svc")
	first := time.Since(start)
	require.ErrorIs(t, err, ErrUnavailable, "the cause is named")
	start = time.Now()
	const n = 200
	for i := 0; i < n; i++ {
		_, err = lb.Pick(context.Background(), "svc")
		require.Error(t, err)
	}
	rest := time.Since(start) / n
	t.Logf("unreachable server: NewSupplier %v, first pick %v, next picks %v each", built, first, rest)
	fragment(t, "hostile-10-unreachable", fmt.Sprintf(
		"| 10. Nacos unreachable at start (NewSupplier %v; first pick failed after %v naming the cause, then %v per pick) | TestIntegration_UnreachableFailsFast | %d picks | 0 |\n", built.Round(10*time.Millisecond), first.Round(time.Millisecond), rest, n+1))
	assert.Less(t, built, 2*time.Second)
	assert.Less(t, first, 2*time.Second)
	assert.Less(t, rest, 20*time.Millisecond)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
}

// TestIntegration_DiskCacheIsItsOwn: graylb's disk cache is a folder no
// other SDK client writes, even when that client was given the same cache
// folder. A plain SDK naming client in the process, configured with
// graylb's cache folder, takes a forged UDP push into its cache and writes
// it to disk; at a restart with Nacos unreachable, graylb starts from the
// lists its own previous process wrote, not from the forged one.
func TestIntegration_DiskCacheIsItsOwn(t *testing.T) {
	addr := nacosAddr(t)
	ctl := script(t)
	restartServer(t)
	svc := uniqueService(t)
	prod := startBackend(t, svc, "prod-1", false, addr)
	gray := startBackend(t, svc, "gray-1", true, addr)
	port := func(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }
	var hits atomic.Int64
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(attacker.Close)

	cacheDir := sdkDir(t) // the program's cache folder, as WithCacheDir names it
	opts := []Option{WithServers(addr), WithCacheDir(cacheDir), WithLogDir(sdkDir(t)), WithLogLevel("error"), WithTimeout(time.Second)}
	// The previous process: graylb routes both kinds, and its lists reach
	// the disk.
	sup, err := NewSupplier(opts...)
	require.NoError(t, err)
	lb, err := graylb.New(sup)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, g := ports(t, lb, prodCtx, svc, 2), ports(t, lb, grayCtx, svc, 2)
		return len(p) == 1 && p[0] == port(prod.srv) && len(g) == 1 && g[0] == port(gray.srv)
	}, 10*time.Second, 50*time.Millisecond)

	// The same process also runs a plain SDK naming client of its own,
	// configured with the same cache folder.
	p, err := newConfig(opts).params()
	require.NoError(t, err)
	cc := *p.ClientConfig
	cc.CacheDir = cacheDir
	p.ClientConfig = &cc
	sdk, err := clients.NewNamingClient(p)
	require.NoError(t, err)
	waitConnected(sdk, 5*time.Second)
	require.NoError(t, sdk.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: func([]model.Instance, error) {}}))
	msg := forgedPush(t, svc, []model.Instance{
		{Ip: "127.0.0.1", Port: uint64(port(attacker)), Weight: 100, Healthy: true, Enable: true, Metadata: map[string]string{"gray": "false"}},
		{Ip: "127.0.0.1", Port: uint64(port(gray.srv)), Weight: 1, Healthy: true, Enable: true, Metadata: map[string]string{"gray": "false"}}, // gray relabelled prod
	})
	v4, v6 := udpPorts(t)
	require.NotEmpty(t, append(v4, v6...), "the plain SDK client listens on UDP")
	send := func() {
		for _, p := range v4 {
			if c, err := net.Dial("udp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				c.Write(msg)
				c.Close()
			}
		}
		for _, p := range v6 {
			if c, err := net.Dial("udp6", net.JoinHostPort("::1", strconv.Itoa(p))); err == nil {
				c.Write(msg)
				c.Close()
			}
		}
	}
	forgedOnDisk := func() bool {
		found := false
		filepath.WalkDir(cacheDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(path, svc) {
				if b, _ := os.ReadFile(path); strings.Contains(string(b), strconv.Itoa(port(attacker))) {
					found = true
				}
			}
			return nil
		})
		return found
	}
	require.Eventually(t, func() bool {
		if forgedOnDisk() {
			return true
		}
		send()
		return false
	}, 10*time.Second, 100*time.Millisecond, "the forged list is written to disk in the cache folder (else this test proves nothing)")
	sdk.CloseClient()
	lb.Close()
	sup.Close()

	// The restart, with Nacos unreachable.
	ctl("stop", "-9")
	sup2, err := NewSupplier(opts...)
	require.NoError(t, err)
	lb2, err := graylb.New(sup2)
	require.NoError(t, err)
	const n = 100
	wrong, failed := 0, 0
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(prodCtx, 5*time.Second)
		in, err := lb2.Pick(ctx, svc)
		cancel()
		switch {
		case err != nil:
			failed++
		case in.Port != port(prod.srv):
			wrong++
		}
	}
	in, gerr := lb2.Pick(grayCtx, svc)
	lb2.Close()
	sup2.Close()
	ctl("start")
	fragment(t, "hostile-06-forged-udp-disk", fmt.Sprintf(
		"| 6b. forged UDP push taken by a plain SDK naming client sharing graylb's cache folder and written to disk; then a restart with Nacos unreachable | TestIntegration_DiskCacheIsItsOwn | %d prod picks | %d to the gray instance or the forged address, %d failed |\n",
		n, wrong, failed))
	assert.Zero(t, wrong, "prod picks that reached the gray instance or the forged address")
	assert.Zero(t, failed, "prod picks that failed: graylb's own disk cache serves the restart")
	if assert.NoError(t, gerr) {
		assert.Equal(t, port(gray.srv), in.Port, "a gray pick reaches the gray instance")
	}
	assert.Zero(t, hits.Load())
}
