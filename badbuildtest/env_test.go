package badbuildtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// binDir holds the programs the tests build (TestMain removes it).
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// programs are the example's program and the graylb command, built once.
type programs struct{ rollout, graylb string }

var (
	buildOnce sync.Once
	built     programs
	buildErr  error
)

// buildPrograms builds examples/rollout and cmd/graylb from this tree, each
// against its own go.mod, once for the package's tests.
func buildPrograms(t *testing.T) programs {
	t.Helper()
	if _, err := os.Stat(filepath.Join("..", "examples", "rollout", "main.go")); err != nil {
		t.Skip("the example's source is not beside this module (a copy fetched from a tag): skipping")
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "graylb-badbuild-bin-"); buildErr != nil {
			return
		}
		built = programs{rollout: filepath.Join(binDir, "rollout"), graylb: filepath.Join(binDir, "graylb")}
		for _, b := range []struct{ dir, pkg, out string }{
			{filepath.Join("..", "examples"), "./rollout", built.rollout},
			{filepath.Join("..", "cmd", "graylb"), ".", built.graylb},
		} {
			cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
			cmd.Dir = b.dir
			// Against the program's own go.mod: GOFLAGS (a -modfile for this
			// module, scripts/inmodule.sh sets one) is not passed on.
			cmd.Env = []string{"GOWORK=off"}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOWORK=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s in %s: %v\n%s", b.pkg, b.dir, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// nacosAddr returns the server's HTTP host:port (GRAYLB_NACOS_ADDR) or
// skips the test.
func nacosAddr(t *testing.T) string {
	t.Helper()
	if raceEnabled {
		t.Skip("skipped under -race: the programs run as processes of their own; make test runs this module without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	return addr
}

// need skips the test when a program it runs is not installed, except
// under CI (CI=true), where a missing program fails it.
func need(t *testing.T, program string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err == nil {
		return p
	}
	msg := program + " is not installed: skipping a test against a real one"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " — under CI it must run")
	}
	t.Skip(msg)
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every 100 ms until it holds, failing the test after
// d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publishRules writes a rules document to Nacos config through the
// server's HTTP API, as an operator's pipeline does, retrying for up to
// 10 s.
func publishRules(t *testing.T, addr, dataID, content string) {
	t.Helper()
	form := url.Values{"dataId": {dataID}, "group": {"DEFAULT_GROUP"}, "content": {content}}
	c := http.Client{Timeout: 2 * time.Second}
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := c.PostForm("http://"+addr+"/nacos/v1/cs/configs", form)
		if err != nil {
			last = err.Error()
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "true" {
			return
		}
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	t.Fatalf("publishing %s: %s", dataID, last)
}

// reliabilityFragment writes text for RELIABILITY.md into the folder
// named by GRAYLB_RELIABILITY_OUT (make test-reliability gathers it);
// without it the text only goes to the test log.
func reliabilityFragment(t *testing.T, name, text string) {
	t.Log("\n" + text)
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
