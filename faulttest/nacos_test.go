package faulttest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
	"github.com/stretchr/testify/require"
)

// TestFault_Nacos puts each fault on the link between the client (a Nacos
// Client with the Supplier and the RuleSource on it) and the Nacos server:
// one proxy on its HTTP port and one on its gRPC port (HTTP + 1000, where
// the SDK reaches it). The instances register directly, and answer
// directly. At each fault's start a new prod instance registers and the
// rules in Nacos config get a gray user: the client learns both only
// through the faulted link.
func TestFault_Nacos(t *testing.T) {
	cl := toxiClient(t)
	addr := nacosAddr(t)
	t.Parallel()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	httpPort, err := strconv.Atoi(port)
	require.NoError(t, err)
	p := freePortPair(t)
	link := append([]*toxiproxy.Proxy{},
		newProxy(t, cl, "nacos-http", fmt.Sprintf("127.0.0.1:%d", p), addr),
		newProxy(t, cl, "nacos-grpc", fmt.Sprintf("127.0.0.1:%d", p+1000), net.JoinHostPort(host, strconv.Itoa(httpPort+1000))))

	svc := fmt.Sprintf("fault-nacos-%d", time.Now().UnixNano()%1e9)
	dataID := svc + "-rules"
	publishConfig(t, addr, dataID, `{}`)
	for _, b := range []*backend{startBackend(t, "prod-1", false), startBackend(t, "gray-1", true)} {
		registerBackend(t, nacosClient(t, addr), svc, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := nacos.NewClient(ctx, nacosOpts(t, fmt.Sprintf("127.0.0.1:%d", p))...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	sup, err := nacos.NewSupplier(nacos.WithClient(c))
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close() })
	src, err := nacos.NewRuleSource(dataID, nacos.WithClient(c))
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	lb, err := graylb.New(sup, graylb.WithRuleSource(src))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	tr := httpctx.NewTransport(lb)
	t.Cleanup(tr.CloseIdleConnections)
	send := httpSender(&http.Client{Transport: tr}, svc)
	waitAnswered(t, send, "prod-1", "gray-1")

	runPlan(t, pair{
		name: "client ↔ Nacos",
		link: link,
		send: send,
		prepareList: func(t *testing.T, round string) func() string {
			b := startBackend(t, "new-"+round, false)
			nc := nacosClient(t, addr)
			return func() string {
				registerBackend(t, nc, svc, b)
				return b.name
			}
		},
		changeRules: func(t *testing.T, user string) {
			publishConfig(t, addr, dataID, fmt.Sprintf(`{"grayUsers":[%q]}`, user))
		},
	}, "fault-nacos", nil)
}

// nacosOpts are the options of every Nacos client here: the server, and
// cache and log folders of their own.
func nacosOpts(t *testing.T, addr string) []nacos.Option {
	dir := tempDir(t)
	return []nacos.Option{nacos.WithServers(addr), nacos.WithCacheDir(filepath.Join(dir, "cache")),
		nacos.WithLogDir(filepath.Join(dir, "log")), nacos.WithLogLevel("error")}
}

// nacosClient is a Client straight to the server, as an instance's
// process has one, closed when the test ends.
func nacosClient(t *testing.T, addr string) *nacos.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := nacos.NewClient(ctx, nacosOpts(t, addr)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// registerBackend registers b as an instance of svc through c.
func registerBackend(t *testing.T, c *nacos.Client, svc string, b *backend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gray := b.gray
	reg, err := nacos.Register(ctx, nacos.Service{Name: svc, Host: "127.0.0.1", Port: b.port(), Gray: &gray}, nacos.WithClient(c))
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
}

// publishConfig writes a config document through the server's HTTP API,
// as an operator's console or pipeline does, retrying for up to 10 s.
func publishConfig(t *testing.T, addr, dataID, content string) {
	t.Helper()
	form := url.Values{"dataId": {dataID}, "group": {"DEFAULT_GROUP"}, "content": {content}}
	c := http.Client{Timeout: 2 * time.Second}
	var last string
	if !poll(10*time.Second, 100*time.Millisecond, func() bool {
		resp, err := c.PostForm("http://"+addr+"/nacos/v1/cs/configs", form)
		if err != nil {
			last = err.Error()
			return false
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "true"
	}) {
		t.Fatalf("publishing %s: %s", dataID, last)
	}
}

// waitAnswered sends gray and prod requests until each named instance has
// answered one, or fails the test after 30 s.
func waitAnswered(t *testing.T, send sender, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names {
		var got string
		var err error
		i := 0
		if !poll(time.Until(deadline), 20*time.Millisecond, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			defer cancel()
			got, err = send(ctx, i%2, "")
			i++
			return err == nil && strings.HasPrefix(got, name+" ")
		}) {
			t.Fatalf("%s has not answered within 30 s (last: %q, %v)", name, got, err)
		}
	}
}
