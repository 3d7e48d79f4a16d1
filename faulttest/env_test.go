package faulttest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/stretchr/testify/require"
)

// toxiClient returns a client of the Toxiproxy server at
// GRAYLB_TOXIPROXY_ADDR, or skips the test.
func toxiClient(t *testing.T) *toxiproxy.Client {
	t.Helper()
	addr := os.Getenv("GRAYLB_TOXIPROXY_ADDR")
	if addr == "" {
		t.Skip("no Toxiproxy server: set GRAYLB_TOXIPROXY_ADDR=127.0.0.1:8474 (make test starts one with scripts/toxiproxy.sh)")
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("GRAYLB_TOXIPROXY_ADDR=%q: want a loopback host:port", addr)
	}
	return toxiproxy.NewClient(addr)
}

// nacosAddr returns the Nacos server's HTTP host:port (GRAYLB_NACOS_ADDR)
// or skips the test.
func nacosAddr(t *testing.T) string {
	t.Helper()
	if raceEnabled {
		t.Skip("the Nacos pair is skipped under -race: nacos-sdk-go races inside its RPC client; make test runs it without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	return addr
}

// newProxy makes a proxy named after the test on a free loopback port to
// upstream (listen "" picks the port), deleted when the test ends.
func newProxy(t *testing.T, cl *toxiproxy.Client, name, listen, upstream string) *toxiproxy.Proxy {
	t.Helper()
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	name = fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-", " ", "-").Replace(name), time.Now().UnixNano()%1e9)
	p, err := cl.CreateProxy(name, listen, upstream)
	require.NoError(t, err)
	t.Cleanup(func() { p.Delete() })
	return p
}

// freePortPair returns a loopback port p such that p and p+1000 are both
// free at the time of the call: the Nacos SDK reaches the server's gRPC
// port at its HTTP port + 1000.
func freePortPair(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		if p+1000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1000))
		l.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return p
	}
	t.Fatal("no free pair of loopback ports p, p+1000 in 50 tries")
	return 0
}

// tempDir is a temporary folder removed with retries at the end of the
// test: the Nacos SDK's disk-cache writer can outlive its client's Close
// by a moment.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "graylb-faulttest-")
	require.NoError(t, err)
	t.Cleanup(func() {
		var err error
		// The SDK's writers finish on their own.
		if !poll(time.Second, 20*time.Millisecond, func() bool { err = os.RemoveAll(dir); return err == nil }) {
			t.Logf("left %s behind: %v", dir, err)
		}
	})
	return dir
}

// reliabilityFragment writes rows for RELIABILITY.md into the folder
// named by GRAYLB_RELIABILITY_OUT (make test-reliability gathers them);
// without it they are only in the test log.
func reliabilityFragment(t *testing.T, name, text string) {
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644))
	}
}
