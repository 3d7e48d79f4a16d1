package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
)

// need skips the test when a program it runs is not installed, except
// under CI (CI=true), where a missing program fails it.
func need(t testing.TB, program, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (the Debian package %s): skipping a test against a real %s", program, pkg, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " — under CI it must run")
	}
	t.Skip(msg)
	return ""
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

// startRedis starts a redis-server of the test's own on a free port and
// returns its address.
func startRedis(t testing.TB) string {
	t.Helper()
	need(t, "redis-server", "redis-server")
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	eventually(t, 20*time.Second, "redis-server on "+addr+" answers", func() bool { return c.Ping(context.Background()).Err() == nil })
	return addr
}

// clientsSee loads the rules as a client with redisrules does.
func clientsSee(t testing.TB, addr string, opt redisrules.Option) (graylb.Rules, error) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	src, err := redisrules.New(c, opt, redisrules.WithNotifications(redisrules.NotifyOff))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return src.Load(ctx)
}

func TestRedisDocumentLayout(t *testing.T) {
	addr := startRedis(t)
	r := []string{"--redis", addr}
	for _, args := range [][]string{{"canary", "5"}, {"users", "add", "u1"}, {"rollback"}} {
		if code, out, errOut := runCLI(t, nil, append(args, r...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, out, errOut)
		}
	}
	got, err := clientsSee(t, addr, redisrules.WithDocument(""))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Closed || got.CanaryPercent != 5 || len(got.GrayUsers) != 1 {
		t.Fatalf("clients see %+v", got)
	}
	code, out, _ := runCLI(t, nil, append([]string{"rules", "get"}, r...)...)
	if code != 0 || !strings.Contains(out, `"closed": true`) {
		t.Fatalf("rules get: exit %d: %s", code, out)
	}
	// A custom key, through the environment.
	vars := map[string]string{envRedis: addr, envRedisKey: "app:rules"}
	if code, out, errOut := runCLI(t, vars, "rules", "apply", writeFile(t, `{"canaryPercent": 50}`)); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if got, err := clientsSee(t, addr, redisrules.WithDocument("app:rules")); err != nil || got.CanaryPercent != 50 {
		t.Fatalf("clients see %+v, %v", got, err)
	}
}

func TestRedisThreeKeysLayout(t *testing.T) {
	addr := startRedis(t)
	r := []string{"--redis", addr, "--redis-keys", "default"}
	code, out, errOut := runCLI(t, nil, append([]string{"rules", "apply", writeFile(t, `{"grayUsers": ["a", "b"], "grayAddresses": ["10.0.0.7:8080"]}`)}, r...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, nil, append([]string{"users", "rm", "a"}, r...)...); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	got, err := clientsSee(t, addr, redisrules.WithKeys("", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := graylb.Rules{Enabled: ptr(true), GrayUsers: []string{"b"}, GrayAddresses: []string{"10.0.0.7:8080"}}
	if !sameRules(got, want) {
		t.Fatalf("clients see %+v, want %+v", got, want)
	}
	// What the layout cannot hold is refused, and nothing is written.
	code, _, errOut = runCLI(t, nil, append([]string{"canary", "5"}, r...)...)
	if code != exitFailed || !strings.Contains(errOut, "three-key Redis layout holds only") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Switched off by hand: a shortcut keeps it off.
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	c.Set(context.Background(), redisrules.DefaultSwitchKey, "false", 0)
	if code, _, errOut := runCLI(t, nil, append([]string{"users", "add", "c"}, r...)...); code != 0 {
		t.Fatal(errOut)
	}
	if v := c.Get(context.Background(), redisrules.DefaultSwitchKey).Val(); v != "false" {
		t.Fatalf("switch %q after users add, want it left false", v)
	}
}

func TestRedisCompareAndSet(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	other := redis.NewClient(&redis.Options{Addr: addr})
	defer other.Close()
	for _, g := range []globals{
		{redis: addr, timeout: 5 * time.Second},
		{redis: addr, redisKeys: "default", timeout: 5 * time.Second},
	} {
		st, err := g.openRedis()
		if err != nil {
			t.Fatal(err)
		}
		prev, err := st.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A concurrent writer changes a key after the read.
		for _, k := range st.keys() {
			switch k {
			case st.docKey:
				other.Set(ctx, k, `{"closed": true}`, 0)
			case st.switchKey:
				other.Set(ctx, k, "false", 0)
			default:
				other.RPush(ctx, k, "intruder")
			}
		}
		err = st.put(ctx, prev, []byte(`{"grayUsers": ["mine"]}`))
		if !errors.Is(err, errConflict) {
			t.Fatalf("%s: put after a concurrent change: %v, want a conflict", st.describe(), err)
		}
		now, _ := st.get(ctx)
		if strings.Contains(string(now.data), "mine") {
			t.Fatalf("%s: the write went through: %s", st.describe(), now.data)
		}
		if err := st.put(ctx, now, []byte(`{"grayUsers": ["mine"]}`)); err != nil {
			t.Fatalf("%s: put on the current content: %v", st.describe(), err)
		}
		st.close()
	}
}

func TestRedisUnreachable(t *testing.T) {
	code, _, errOut := runCLI(t, nil, "rules", "get", "--redis", "127.0.0.1:"+strconv.Itoa(freePort(t)), "--timeout", "1s")
	if code != exitFailed || !strings.Contains(errOut, "refused") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func ptr[T any](v T) *T { return &v }
