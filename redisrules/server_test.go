package redisrules_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The tests run against real redis-server processes, each on a free
// loopback port with a directory of its own, killed when the test ends.
// Without redis-server installed they skip (and the Example, which cannot
// skip, is left out of the run).

const waitFor = 10 * time.Second // the bound of every wait in these tests

// sharedAddr is the address of the server TestMain starts for the Example
// and the tests that need nothing special; "" without redis-server.
var sharedAddr string

func TestMain(m *testing.M) {
	flag.Parse()
	var stop func()
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Println("redisrules: redis-server is not installed: the tests that need it skip, the Example is left out")
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = flag.Set("test.run", "^(Test|Fuzz)")
		}
	} else {
		dir, err := os.MkdirTemp("", "redisrules-shared-")
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		s := &server{dir: dir}
		if err := s.start(); err != nil {
			fmt.Println("redisrules: starting the shared redis-server:", err)
			os.Exit(1)
		}
		sharedAddr = s.addr()
		stop = func() { s.kill(); os.RemoveAll(dir) }
	}
	code := m.Run()
	if stop != nil {
		stop()
	}
	os.Exit(code)
}

// server is one redis-server process.
type server struct {
	port   int
	dir    string
	args   []string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	fixed  bool // the port was used: restarts keep it
}

// startServer starts a redis-server with extra arguments ("--name",
// "value", ...) for the test, killed when it ends; it skips the test
// without redis-server.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (the Debian package redis-server); skipping a test against a real Redis")
	}
	s := &server{dir: t.TempDir(), args: args}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// start starts the server, on a free port the first time and on the same
// port after, and waits until it answers.
func (s *server) start() error {
	for attempt := 0; ; attempt++ {
		if !s.fixed {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			s.port = l.Addr().(*net.TCPAddr).Port
			l.Close()
			if s.port > 65535-10000 && slices.Contains(s.args, "--cluster-enabled") {
				continue // a Cluster node's bus listens on its port + 10000
			}
		}
		var args []string
		rest := s.args
		if len(rest) > 0 && strings.HasSuffix(rest[0], ".conf") { // a config file comes first
			args, rest = append(args, rest[0]), rest[1:]
		}
		args = append(append(args,
			"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no",
			"--logfile", filepath.Join(s.dir, "redis.log"),
		), rest...)
		cmd := exec.Command("redis-server", args...)
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		if err := s.ready(exited); err == nil {
			s.mu.Lock()
			s.cmd, s.exited, s.fixed = cmd, exited, true
			s.mu.Unlock()
			return nil
		} else if attempt >= 2 {
			cmd.Process.Kill()
			<-exited
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s: %v; log:\n%s", s.addr(), err, log)
		}
		cmd.Process.Kill()
		<-exited
	}
}

// ready waits until the server answers PING.
func (s *server) ready(exited <-chan struct{}) error {
	tick := time.NewTicker(10 * time.Millisecond) // a retry interval, bounded by deadline
	defer tick.Stop()
	deadline := time.After(waitFor)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), 200*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			c.Close()
			// +PONG, or -NOAUTH with a password: either way it serves.
			if err == nil && (bytes.HasPrefix(buf[:n], []byte("+PONG")) || bytes.HasPrefix(buf[:n], []byte("-NOAUTH"))) {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("exited")
		case <-deadline:
			return fmt.Errorf("not answering after %v", waitFor)
		case <-tick.C:
		}
	}
}

// kill kills the server at once (SIGKILL) and waits for it to exit.
func (s *server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(waitFor):
		}
	}
}

// client returns a client of the server, closed when the test ends.
func (s *server) client(t testing.TB, opt ...func(*redis.Options)) *redis.Client {
	return newClient(t, s.addr(), opt...)
}

func newClient(t testing.TB, addr string, opt ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second}
	for _, f := range opt {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// shared returns a client of the shared server and key names of the test's
// own, in one hash tag; it skips without redis-server.
func shared(t testing.TB) (*redis.Client, [3]string) {
	t.Helper()
	if sharedAddr == "" {
		t.Skip("redis-server is not installed (the Debian package redis-server); skipping a test against a real Redis")
	}
	tag := "{" + t.Name() + "}"
	keys := [3]string{tag + ":switch", tag + ":users", tag + ":addresses"}
	c := newClient(t, sharedAddr)
	clean := func() { c.Del(context.Background(), keys[:]...) }
	clean() // a run before this one (-count) left them
	t.Cleanup(clean)
	return c, keys
}

// logBuffer is a slog handler's output, safe to read while written.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count returns how many lines hold s.
func (b *logBuffer) count(s string) int {
	n := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, waitFor, 5*time.Millisecond, "after %v: %s", waitFor, what)
}

// reads counts the reads of the RuleSources over a client: each reads its
// keys in one pipeline (or transaction), and the tests send their own
// commands one at a time. A poll is a read and what it delivers, in the
// watch's goroutine: the read after it begins once it ended.
type reads struct{ n atomic.Int64 }

// countReads counts the pipelines c sends from now on.
func countReads(c *redis.Client) *reads {
	r := &reads{}
	c.AddHook(r)
	return r
}

func (r *reads) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (r *reads) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (r *reads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// waitPolls waits until n whole polls ran after the call: the n+1th read
// after it began.
func (r *reads) waitPolls(t testing.TB, n int) {
	t.Helper()
	want := r.n.Load() + int64(n) + 1
	eventually(t, fmt.Sprintf("%d polls", n), func() bool { return r.n.Load() >= want })
}

// dials counts the connections a client opens (redis.Options.Dialer): a
// poll of a server that refuses them, or refuses the client's password,
// opens one.
func dials(n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}
