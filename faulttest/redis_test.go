package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestFault_Redis puts each fault on the link between the client (a
// redisrules RuleSource, the document layout, on a go-redis client with
// its default options) and a redis-server that publishes keyspace
// notifications, so the RuleSource both subscribes and polls over the
// link. The instances come from an in-memory registry and answer
// directly. At each fault's start the rule document gets a gray user,
// written straight to the server.
func TestFault_Redis(t *testing.T) {
	cl := toxiClient(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (the Debian package redis-server)")
	}
	t.Parallel()
	addr := startRedis(t, "--notify-keyspace-events", "KA")
	proxy := newProxy(t, cl, "redis", "", addr)
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { direct.Close() })
	key := fmt.Sprintf("{faulttest}:rules-%d", time.Now().UnixNano()%1e9)
	setRules := func(t *testing.T, doc string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, direct.Set(ctx, key, doc, 0).Err())
	}
	setRules(t, `{}`)

	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Listen})
	t.Cleanup(func() { viaProxy.Close() })
	src, err := redisrules.New(viaProxy, redisrules.WithDocument(key))
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })

	const svc = "fault-redis"
	reg := graylb.NewRegistry()
	for _, b := range []*backend{startBackend(t, "prod-1", false), startBackend(t, "gray-1", true)} {
		require.NoError(t, reg.Register(graylb.NewInstance(svc, "127.0.0.1", b.port(), b.metadata())))
	}
	lb, err := graylb.New(reg, graylb.WithRuleSource(src))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	tr := httpctx.NewTransport(lb)
	t.Cleanup(tr.CloseIdleConnections)
	send := httpSender(&http.Client{Transport: tr}, svc)
	waitAnswered(t, send, "prod-1", "gray-1")

	runPlan(t, pair{
		name:        "client ↔ Redis",
		link:        []*toxiproxy.Proxy{proxy},
		send:        send,
		changeRules: func(t *testing.T, user string) { setRules(t, fmt.Sprintf(`{"grayUsers":[%q]}`, user)) },
	}, "fault-redis", nil)
}

// startRedis starts a redis-server on a free loopback port with extra
// arguments, killed when the test ends, and returns its address once it
// answers PING.
func startRedis(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log")}, args...)...)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	answers := poll(10*time.Second, 20*time.Millisecond, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte("PING\r\n"))
		buf := make([]byte, 16)
		n, _ := c.Read(buf)
		c.Close()
		return bytes.HasPrefix(buf[:n], []byte("+PONG"))
	})
	select {
	case <-exited:
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		t.Fatalf("redis-server on %s exited; log:\n%s", addr, log)
	default:
	}
	if !answers {
		t.Fatalf("redis-server on %s did not answer PING within 10 s", addr)
	}
	return addr
}
