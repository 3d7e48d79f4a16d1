package interoptest

// The harness: the test Nacos server, the Java applications (one JVM each,
// built once), graylb services in this process, and graylb instances in a
// child process (this test binary) for a real SIGTERM.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
)

// nacosAddr returns the server's HTTP host:port (GRAYLB_NACOS_ADDR) or
// skips the test.
func nacosAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	return addr
}

// jars returns the folder holding gateway.jar and apps.jar, or skips.
func jars(t testing.TB) (gateway, apps string) {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java on PATH: the Java estate needs a Java 17 runtime")
	}
	gateway, apps = filepath.Join("java", "gateway", "target", "gateway.jar"), filepath.Join("java", "apps", "target", "apps.jar")
	if dir := os.Getenv("GRAYLB_INTEROP_JARS"); dir != "" {
		gateway, apps = filepath.Join(dir, "gateway.jar"), filepath.Join(dir, "apps.jar")
	}
	for _, j := range []string{gateway, apps} {
		if _, err := os.Stat(j); err != nil {
			t.Skipf("%s is not built: mvn -B package in interoptest/java (make test builds it)", j)
		}
	}
	return gateway, apps
}

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// until calls cond every tick until it holds or within passes.
func until(within, tick time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(tick) // polling a condition with a deadline
	}
}

// host is an instance as the server lists it.
type host struct {
	Port     int               `json:"port"`
	Metadata map[string]string `json:"metadata"`
}

// listed returns the instances the server lists for service.
func listed(addr, service string) []host {
	resp, err := http.Get("http://" + addr + "/nacos/v1/ns/instance/list?serviceName=" + url.QueryEscape(service))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var l struct {
		Hosts []host `json:"hosts"`
	}
	if json.NewDecoder(resp.Body).Decode(&l) != nil {
		return nil
	}
	return l.Hosts
}

// javaProc is one JVM of the estate.
type javaProc struct {
	name string
	port int
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// javaOpts start a JVM quickly on a small machine: the client compiler,
// the serial collector.
var javaOpts = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xss512k"}

// startJava starts jar with args (Spring properties, --key=value) on a
// free port, registered in Nacos as name unless it is the gateway; it
// does not wait (see ready).
func startJava(t *testing.T, jar, name string, args ...string) *javaProc {
	t.Helper()
	port := freePort(t)
	logf := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	nacosAt := os.Getenv("GRAYLB_NACOS_ADDR") // none: an application that registers nowhere (TestJavaKafka)
	if nacosAt == "" {
		nacosAt = "127.0.0.1:1"
	}
	all := append(append([]string(nil), javaOpts...), "-jar", jar, "--PORT="+strconv.Itoa(port), "--NACOS_ADDR="+nacosAt, "--interop.name="+name)
	cmd := exec.Command("java", append(all, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &javaProc{name: name, port: port, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(logf)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s's log ends:\n%s", name, b)
		}
	})
	return p
}

// url is the JVM's address.
func (p *javaProc) url() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }

// ready waits until the JVM answers on its port and, when registered, the
// server lists it.
func (p *javaProc) ready(t *testing.T, registered bool) {
	t.Helper()
	ok := until(180*time.Second, 200*time.Millisecond, func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.port), time.Second)
		if err != nil {
			return false
		}
		c.Close()
		if !registered {
			return true
		}
		for _, h := range listed(nacosAddr(t), p.name) {
			if h.Port == p.port {
				return true
			}
		}
		return false
	})
	select {
	case <-p.done:
		t.Fatalf("%s exited while starting", p.name)
	default:
	}
	if !ok {
		t.Fatalf("%s not ready within 180 s", p.name)
	}
}

// stop stops the JVM gracefully (SIGTERM) and waits for it.
func (p *javaProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Errorf("%s did not stop within 90 s of SIGTERM", p.name)
		p.cmd.Process.Kill()
		<-p.done
	}
}

// seedKeys are a seed's key names: the request header and the metadata
// key of the gray flag.
type seedKeys struct{ header, key string }

var (
	keysTag   = seedKeys{"gray-tag", "gray-tag"} // seeds 001 and 002, Spring Cloud Alibaba's gray-tag: ${gray:false}
	keysPlain = seedKeys{"gray", "gray"}         // seed 000, graylb's defaults
)

// options are the graylb options that agree with a seed's keys.
func (k seedKeys) options(gray bool) []graylb.Option {
	return []graylb.Option{graylb.WithGrayHeader(k.header), graylb.WithGrayKey(k.key), graylb.WithSelfGray(gray)}
}

// goInstance is a graylb service instance in this process: a LoadBalancer
// over Nacos, an HTTP server behind httpctx.Middleware, a client through
// httpctx.Transport, its registration.
type goInstance struct {
	name string
	gray bool
	lb   *graylb.LoadBalancer
	srv  *http.Server
	reg  *nacos.Registration
	port int
}

// chainHandler answers /chain as the Java hops do: "name@kind", then what
// the next service of ?next= answered, called through client with the
// request's context (its kind kept and written for the next hop).
func chainHandler(name string, gray bool, client *http.Client) http.Handler {
	kind := "prod"
	if gray {
		kind = "gray"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		self := name + "@" + kind
		next := r.URL.Query().Get("next")
		if next == "" {
			io.WriteString(w, self)
			return
		}
		first, rest, _ := strings.Cut(next, ",")
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+first+"/chain?next="+url.QueryEscape(rest), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			http.Error(w, fmt.Sprintf("%s: %s answered %d: %s", self, first, resp.StatusCode, b), http.StatusBadGateway)
			return
		}
		io.WriteString(w, self+","+string(b))
	})
}

// newGoLB is a LoadBalancer over the test server with a seed's keys.
func newGoLB(t testing.TB, addr string, keys seedKeys, gray bool) (*graylb.LoadBalancer, func()) {
	t.Helper()
	dir := t.TempDir()
	sup, err := nacos.NewSupplier(nacos.WithServers(addr), nacos.WithCacheDir(filepath.Join(dir, "cache")),
		nacos.WithLogDir(filepath.Join(dir, "log")), nacos.WithReconcile(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := graylb.New(sup, keys.options(gray)...)
	if err != nil {
		sup.Close()
		t.Fatal(err)
	}
	return lb, func() { lb.Close(); sup.Close() }
}

// startGo starts a graylb instance of name in this process, registered
// with its LoadBalancer's keys and kind.
func startGo(t *testing.T, name string, keys seedKeys, gray bool) *goInstance {
	t.Helper()
	addr := nacosAddr(t)
	lb, closeLB := newGoLB(t, addr, keys, gray)
	client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 10 * time.Second}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in := &goInstance{name: name, gray: gray, lb: lb, port: l.Addr().(*net.TCPAddr).Port}
	in.srv = &http.Server{Handler: httpctx.Middleware(lb)(chainHandler(name, gray, client))}
	go in.srv.Serve(l)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in.reg, err = nacos.Register(ctx, nacos.Service{Name: name, Host: "127.0.0.1", Port: in.port},
		nacos.WithServers(addr), nacos.WithCacheDir(filepath.Join(dir, "cache")), nacos.WithLogDir(filepath.Join(dir, "log")),
		nacos.WithLoadBalancer(lb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.reg.Close()
		in.srv.Close()
		closeLB()
	})
	return in
}

// childSpec is what a graylb instance in a child process is.
type childSpec struct {
	Name   string `json:"name"`
	Gray   bool   `json:"gray"`
	Header string `json:"header"`
	Key    string `json:"key"`
	Nacos  string `json:"nacos"`
	// Drain: "callers" (WithLoadBalancer: until callers stop) or "clock"
	// (the drain wait alone, as before).
	Drain string `json:"drain"`
	Dir   string `json:"dir"`
}

// child is a graylb instance in a child process.
type child struct {
	spec    childSpec
	cmd     *exec.Cmd
	port    int
	stopped chan string // the child's last line: how its stop went
	done    chan struct{}
}

// startChild starts a graylb instance in a child process and waits until
// the server lists it.
func startChild(t *testing.T, spec childSpec) *child {
	t.Helper()
	spec.Nacos, spec.Dir = nacosAddr(t), t.TempDir()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestGoInstanceChild$", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), "GRAYLB_INTEROP_CHILD="+string(b))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{spec: spec, cmd: cmd, stopped: make(chan string, 1), done: make(chan struct{})}
	ready := make(chan int, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if p, ok := strings.CutPrefix(line, "READY "); ok {
				n, _ := strconv.Atoi(p)
				ready <- n
			}
			if s, ok := strings.CutPrefix(line, "STOPPED "); ok {
				c.stopped <- s
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-c.done })
	select {
	case c.port = <-ready:
	case <-c.done:
		t.Fatalf("child %s exited while starting", spec.Name)
	case <-time.After(60 * time.Second):
		t.Fatalf("child %s not ready within 60 s", spec.Name)
	}
	return c
}

// sigterm sends SIGTERM and waits until the child stopped: what it said
// of its stop.
func (c *child) sigterm(t *testing.T) string {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case s := <-c.stopped:
		<-c.done
		return s
	case <-c.done:
		return "exited without saying"
	case <-time.After(120 * time.Second):
		t.Fatalf("child %s did not stop within 120 s of SIGTERM", c.spec.Name)
		return ""
	}
}

// TestGoInstanceChild is the child process of startChild: a graylb
// instance that stops on SIGTERM as the docs say (nacos.Registration).
func TestGoInstanceChild(t *testing.T) {
	raw := os.Getenv("GRAYLB_INTEROP_CHILD")
	if raw == "" {
		t.Skip("run by the deployment flows only")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	keys := seedKeys{spec.Header, spec.Key}
	lb, closeLB := newGoLB(t, spec.Nacos, keys, spec.Gray)
	defer closeLB()
	client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 10 * time.Second}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	// Its answers name its port: the flows see which instance served.
	srv := &http.Server{Handler: httpctx.Middleware(lb)(chainHandler(spec.Name+":"+strconv.Itoa(port), spec.Gray, client))}
	go srv.Serve(l)
	sigterm := make(chan os.Signal, 1)
	signalNotify(sigterm)
	opts := []nacos.Option{nacos.WithServers(spec.Nacos), nacos.WithCacheDir(filepath.Join(spec.Dir, "cache")), nacos.WithLogDir(filepath.Join(spec.Dir, "log"))}
	svc := nacos.Service{Name: spec.Name, Host: "127.0.0.1", Port: port}
	if spec.Drain == "callers" {
		opts = append(opts, nacos.WithLoadBalancer(lb))
	} else {
		svc.Gray, svc.GrayKey = &spec.Gray, spec.Key
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	reg, err := nacos.Register(ctx, svc, opts...)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if !until(30*time.Second, 50*time.Millisecond, func() bool {
		for _, h := range listed(spec.Nacos, spec.Name) {
			if h.Port == port {
				return true
			}
		}
		return false
	}) {
		t.Fatal("not listed within 30 s")
	}
	fmt.Printf("READY %d\n", port)
	<-sigterm
	// The graceful stop of the docs: off the registry, drained, then the
	// requests in flight finish.
	start := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer scancel()
	derr := reg.Deregister(sctx)
	drained := time.Since(start)
	srv.Shutdown(sctx)
	reg.CloseContext(sctx)
	msg := "ok"
	if derr != nil {
		msg = strings.ReplaceAll(derr.Error(), "\n", "; ")
	}
	fmt.Printf("STOPPED drained %.1f s: %s\n", drained.Seconds(), msg)
}

// get GETs u with header h (may be nil) and returns the body of a 200.
func get(ctx context.Context, cl *http.Client, u string, h http.Header) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := cl.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// kinds returns the kinds a chain's answer names, hop by hop.
func kinds(answer string) []string {
	var out []string
	for _, hop := range strings.Split(answer, ",") {
		_, k, _ := strings.Cut(hop, "@")
		out = append(out, k)
	}
	return out
}

var errWrongKind = errors.New("wrong kind")

// reliabilityOut writes a table's rows to
// $GRAYLB_RELIABILITY_OUT/interop-<section>.md (make test-reliability
// gathers them into RELIABILITY.md) and logs them.
func reliabilityOut(t *testing.T, section string, lines ...string) {
	t.Helper()
	t.Logf("%s:\n%s", section, strings.Join(lines, "\n"))
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "interop-"+section+".md"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// t0ctx is the context of requests made outside a test's own.
var t0ctx = context.Background()

// splitHops returns a chain answer's hops.
func splitHops(answer string) []string { return strings.Split(answer, ",") }
