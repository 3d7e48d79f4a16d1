package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A rollout killed with SIGKILL leaves its lease behind: a second rollout
// refuses while the lease lives, and takes it over once it expired
// (--lease-ttl after the killed one's last renewal), naming the dead
// holder. The first runs as the built command, in a process of its own.
func TestIntegration_LeaseOfAKilledRollout(t *testing.T) {
	integration(t)
	prom := fakeProm(t, func(string) string { return vector("gray", "1000", "prod", "1000") })
	bin := filepath.Join(t.TempDir(), "graylb")
	build := exec.Command("go", "build", "-o", bin, ".")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}
	build.Env = append(env, "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name  string
		flags func(t *testing.T) []string
	}{
		{"nacos", func(t *testing.T) []string {
			addr, group := nacosAddr(t), fmt.Sprintf("graylb-killed-%d", time.Now().UnixNano())
			registerPersistent(t, addr, group, "svc")
			return []string{"--nacos", addr, "--group", group}
		}},
		{"redis", func(t *testing.T) []string {
			registry := newFakeNacos(t)
			registry.register("svc", prodAndGray)
			return []string{"--redis", startRedis(t), "--nacos", registry.addr()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"rollout", "--service", "svc", "--prometheus", prom.URL, "--steps", "1,5",
				"--interval", "1h", "--poll", "50ms", "--window", "5s", "--min-requests", "50", "--lease-ttl", "3s"}, tc.flags(t)...)
			first := exec.Command(bin, args...)
			var errOut syncBuffer
			first.Stderr = &errOut
			if err := first.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { first.Wait(); close(exited) }()
			t.Cleanup(func() { first.Process.Kill(); <-exited })
			eventually(t, 30*time.Second, "the first rollout sets its first step", func() bool {
				return strings.Contains(errOut.String(), "step 1/2: canary 1% set")
			})
			first.Process.Kill()
			<-exited
			killed := time.Now()
			pid := fmt.Sprintf("pid %d", first.Process.Pid)

			code, out, errText := runCLI(t, nil, args...)
			if code != exitFailed || !strings.Contains(out, "another rollout is running") || !strings.Contains(out, pid) {
				t.Fatalf("while the killed rollout's lease lives: exit %d:\n%s%s", code, out, errText)
			}
			eventually(t, 10*time.Second, "the lease expires", func() bool { return time.Since(killed) > 3*time.Second })
			second := startRollout(t, time.Minute, args...)
			second.untilStep(t, "1/2: canary 1%")
			if log := second.errOut.String(); !strings.Contains(log, "taking over the lease of the rollout of svc by") ||
				!strings.Contains(log, pid) || !strings.Contains(log, "stopped renewing it") {
				t.Fatalf("the takeover does not say whose lease it was:\n%s", log)
			}
			t.Logf("second rollout:\n%s", second.errOut.String())
		})
	}
}
