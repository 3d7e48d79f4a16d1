package docs

import (
	"context"
	"log"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
)

// redisServer starts a redis-server on a free loopback port for the test
// and returns its address; it skips the test without redis-server.
func redisServer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (the Debian package redis-server); skipping a snippet that needs a real Redis")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--requirepass", "s3cret", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, Password: "s3cret"})
	defer c.Close()
	// Waiting for a process to start listening.
	if !poll(10*time.Second, 20*time.Millisecond, func() bool { return c.Ping(context.Background()).Err() == nil }) {
		t.Fatalf("redis-server on %s did not answer within 10 s", addr)
	}
	return addr
}

// docs/redis.md: rules from Redis' three keys.
func TestRedisTour(t *testing.T) {
	addr, pw := redisServer(t), "s3cret"
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr, Password: pw})
	defer admin.Close()
	if err := admin.Set(ctx, "{graylb}:gray:switch", "true", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.RPush(ctx, "{graylb}:gray:users", "alice").Err(); err != nil {
		t.Fatal(err)
	}
	supplier := graylb.NewRegistry()
	supplier.Register(graylb.NewInstance("user-service", "10.0.0.1", 8080, nil))
	supplier.Register(graylb.NewInstance("user-service", "10.0.0.2", 8080, map[string]string{"gray": "true"}))

	// snippet: redis-tour
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, Password: pw}) // addr: "redis:6379"
	defer rdb.Close()
	src, err := redisrules.New(rdb) // the three keys below
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	lb, err := graylb.New(supplier, graylb.WithRuleSource(src))
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()
	// end snippet

	for user, want := range map[string]string{"alice": "10.0.0.2:8080", "bob": "10.0.0.1:8080"} {
		in, err := lb.Pick(graylb.WithValue(ctx, "uid", user), "user-service")
		if err != nil || in.Addr() != want {
			t.Errorf("%s: %s %v, want %s", user, in.Addr(), err, want)
		}
	}
}
