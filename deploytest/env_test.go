package deploytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb/nacos"
	"github.com/stretchr/testify/require"
)

// nacosAddr returns the server's HTTP host:port (GRAYLB_NACOS_ADDR) or
// skips the test.
func nacosAddr(t *testing.T) string {
	t.Helper()
	if raceEnabled {
		t.Skip("deployment flows skipped under -race: nacos-sdk-go races inside its RPC client; make test runs them without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	return addr
}

// scriptTimeout bounds one run of scripts/nacos.sh (its own waits are
// bounded too).
const scriptTimeout = 3 * time.Minute

// nacosScript returns a function running scripts/nacos.sh
// (GRAYLB_NACOS_SCRIPT), bounded, or skips the test. A cleanup starts the
// server again whatever happened.
func nacosScript(t *testing.T) func(args ...string) error {
	t.Helper()
	s := os.Getenv("GRAYLB_NACOS_SCRIPT")
	if s == "" {
		t.Skip("set GRAYLB_NACOS_SCRIPT to scripts/nacos.sh to restart the server (make test does)")
	}
	run := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
		defer cancel()
		if out, err := exec.CommandContext(ctx, s, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("scripts/nacos.sh %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	t.Cleanup(func() { run("start") })
	return run
}

// sdkDir is a temporary folder for an SDK client's cache and log files,
// removed with retries at the end of the test: the SDK's disk-cache
// writer can outlive its client's Close by a moment.
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "graylb-deploytest-")
	require.NoError(t, err)
	t.Cleanup(func() {
		var err error
		if !poll(time.Second, 20*time.Millisecond, func() bool { err = os.RemoveAll(dir); return err == nil }) {
			t.Logf("left %s behind: %v", dir, err)
		}
	})
	return dir
}

// poll calls cond every tick until it holds or within passes, and reports
// whether it held.
func poll(within, tick time.Duration, cond func() bool) bool {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for deadline := time.After(within); !cond(); {
		select {
		case <-ticker.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

// clientOpts are the options of every Nacos client in these tests: the
// server, and cache and log folders of their own.
func clientOpts(t *testing.T, addr string) []nacos.Option {
	dir := sdkDir(t)
	return []nacos.Option{nacos.WithServers(addr), nacos.WithCacheDir(filepath.Join(dir, "cache")),
		nacos.WithLogDir(filepath.Join(dir, "log")), nacos.WithLogLevel("error")}
}

// uniqueName is a service or data id name no earlier run used.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("deploy-%s-%d", strings.ToLower(strings.TrimPrefix(t.Name(), "TestDeploy_")), time.Now().UnixNano()%1e9)
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

// setInstanceMetadata replaces the metadata of a registered ephemeral
// instance through the server's HTTP API, as an operator does in the
// console, retrying for up to 10 s.
func setInstanceMetadata(t *testing.T, addr, service string, port int, metadata string) {
	t.Helper()
	q := url.Values{"serviceName": {service}, "groupName": {"DEFAULT_GROUP"}, "ip": {"127.0.0.1"},
		"port": {strconv.Itoa(port)}, "ephemeral": {"true"}, "metadata": {metadata}}
	c := http.Client{Timeout: 2 * time.Second}
	var last string
	if !poll(10*time.Second, 100*time.Millisecond, func() bool {
		req, err := http.NewRequest(http.MethodPut, "http://"+addr+"/nacos/v1/ns/instance?"+q.Encode(), nil)
		if err != nil {
			last = err.Error()
			return false
		}
		resp, err := c.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("updating the metadata of %s 127.0.0.1:%d: %s", service, port, last)
	}
}

// reliabilityFragment writes a row for RELIABILITY.md into the folder
// named by GRAYLB_RELIABILITY_OUT (make test-reliability gathers them);
// without it the row only goes to the test log.
func reliabilityFragment(t *testing.T, name, text string) {
	t.Log(text)
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644))
	}
}
