//go:build unix

package nacos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nacosScript is scripts/nacos.sh: GRAYLB_NACOS_SCRIPT, else the
// repository's copy beside this module.
func nacosScript(t *testing.T) string {
	t.Helper()
	if s := os.Getenv("GRAYLB_NACOS_SCRIPT"); s != "" {
		return s
	}
	s, err := filepath.Abs(filepath.Join("..", "scripts", "nacos.sh"))
	require.NoError(t, err)
	if _, err := os.Stat(s); err != nil {
		t.Skip("no scripts/nacos.sh beside this module; set GRAYLB_NACOS_SCRIPT")
	}
	return s
}

// fakeServer is an executable that stands in for the server binary: it
// says it is the version the script wants, and run as a server it writes
// a file named started in NACOS_HOME, prints what FAKE_SERVER_SAYS and
// exits.
const fakeServer = `#!/bin/sh
[ "$1" = --version ] && { echo "rnacos ${RNACOS_VERSION:-0.8.8}"; exit 0; }
: >"$NACOS_HOME/started"
echo "$FAKE_SERVER_SAYS"
exit 1
`

// runScript runs the script with args against a fake server and a folder
// of its own, and returns its output, exit status and duration.
func runScript(t *testing.T, env []string, args ...string) (home, out string, status int, took time.Duration) {
	t.Helper()
	home = t.TempDir()
	bin := filepath.Join(home, "fake-server")
	require.NoError(t, os.WriteFile(bin, []byte(fakeServer), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, nacosScript(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NACOS_") && !strings.HasPrefix(kv, "RNACOS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append([]string{"NACOS_HOME=" + home, "RNACOS_BIN=" + bin, "NACOS_START_DEADLINE=60"}, env...)...)
	// The script starts processes of its own: the whole group goes at the bound.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	began := time.Now()
	b, err := cmd.CombinedOutput()
	took = time.Since(began)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		status = ee.ExitCode()
	} else {
		require.NoError(t, err, "%s", b)
	}
	return home, string(b), status, took
}

// holdPort listens on a free loopback port until the test ends.
func holdPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// TestNacosScript_TakenPortFailsAtOnce: scripts/nacos.sh start and
// cluster-start exit 3 at once, without starting a server, when another
// program listens on a port they need, and name the port and its holder;
// a server that finds a port in use anyway (AddrInUse in its log) is not
// started again either.
func TestNacosScript_TakenPortFailsAtOnce(t *testing.T) {
	// The script names the holder when ss or lsof can tell: this process.
	_, errSS := exec.LookPath("ss")
	_, errLsof := exec.LookPath("lsof")
	holderKnown := errSS == nil || errLsof == nil
	for _, c := range []struct {
		name, what string
		args       []string
		httpPort   func(held int) int // NACOS_HTTP_PORT for the held port
	}{
		{"start, HTTP", "HTTP", []string{"start"}, func(p int) int { return p }},
		{"start, gRPC", "gRPC and raft", []string{"start"}, func(p int) int { return p - 1000 }},
		{"start, console", "console", []string{"start"}, func(p int) int { return p - 2000 }},
		// Node 2's gRPC port: cluster nodes from NACOS_HTTP_PORT + 10000, 10 apart.
		{"cluster-start, node 2's gRPC", "gRPC and raft", []string{"cluster-start", "3"}, func(p int) int { return p - 1000 - 10 - 10000 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			held := holdPort(t)
			home, out, status, took := runScript(t, []string{"NACOS_HTTP_PORT=" + strconv.Itoa(c.httpPort(held))}, c.args...)
			t.Logf("exit %d after %v:\n%s", status, took.Round(time.Millisecond), out)
			assert.Equal(t, 3, status, "the exit status of a taken port")
			assert.Less(t, took, 20*time.Second, "a taken port fails at once, not at the start deadline")
			assert.Contains(t, out, fmt.Sprintf("port %d (%s)", held, c.what))
			if holderKnown {
				assert.Contains(t, out, fmt.Sprintf("(pid %d)", os.Getpid()), "the holder named")
			}
			assert.NoFileExists(t, filepath.Join(home, "started"), "a server was started")
		})
	}
	// A port held without a listener (a socket bound and not listening)
	// shows only in the server's log.
	t.Run("start, the server's log says AddrInUse", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		free := l.Addr().(*net.TCPAddr).Port
		require.NoError(t, l.Close())
		home, out, status, took := runScript(t, []string{"NACOS_HTTP_PORT=" + strconv.Itoa(free),
			`FAKE_SERVER_SAYS=Error: Os { code: 98, kind: AddrInUse, message: "Address already in use" }`}, "start")
		t.Logf("exit %d after %v:\n%s", status, took.Round(time.Millisecond), out)
		assert.Equal(t, 3, status)
		assert.Less(t, took, 20*time.Second, "a port in use fails at once, not at the start deadline")
		assert.Contains(t, out, fmt.Sprintf("HTTP %d, gRPC and raft %d, console %d", free, free+1000, free+2000))
		assert.Contains(t, out, "AddrInUse")
		assert.FileExists(t, filepath.Join(home, "started"), "the server ran once")
	})
}
