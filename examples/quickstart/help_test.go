package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain runs main itself when the test re-runs its own binary as the
// quickstart command (QUICKSTART_MAIN=1), so the command-line behaviour
// is tested as a user meets it.
func TestMain(m *testing.M) {
	if os.Getenv("QUICKSTART_MAIN") == "1" {
		os.Args = append([]string{"quickstart"}, strings.Fields(os.Getenv("QUICKSTART_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestHelp: -h prints the usage and exits without running the demo.
func TestHelp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUICKSTART_MAIN=1", "QUICKSTART_ARGS=-h")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("quickstart -h did not exit within 30 s:\n%s", out)
	}
	if err != nil {
		t.Fatalf("quickstart -h: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Usage: quickstart") {
		t.Errorf("quickstart -h printed no usage:\n%s", out)
	}
	if strings.Contains(string(out), "==") {
		t.Errorf("quickstart -h ran the demo:\n%s", out)
	}
}
