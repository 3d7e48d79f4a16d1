package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain runs main itself when the test re-runs its own binary as the
// command (KAFKA_EXAMPLE_MAIN=1), so the command line is tested as a user
// meets it.
func TestMain(m *testing.M) {
	if os.Getenv("KAFKA_EXAMPLE_MAIN") == "1" {
		os.Args = append([]string{"kafka"}, strings.Fields(os.Getenv("KAFKA_EXAMPLE_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs the command with args and returns its output and exit code.
func runMain(t *testing.T, args string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KAFKA_EXAMPLE_MAIN=1", "KAFKA_EXAMPLE_ARGS="+args)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("kafka %s did not exit within 30 s:\n%s", args, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestCommandLine: -h prints the usage, and bad input is refused with a
// clear message and a non-zero status, before anything connects.
func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		args, want string
		code       int
	}{
		{"-h", "Usage: kafka", 0},
		{"extra", "Usage: kafka", 2},
		{"-brokers nohost", `-brokers: "nohost" is not host:port`, 1},
		{"-brokers :9092", `-brokers: ":9092" is not host:port`, 1},
		{"-brokers 127.0.0.1:", `-brokers: "127.0.0.1:" is not host:port`, 1},
		{"-brokers 127.0.0.1:1,,127.0.0.1:2", `-brokers: "" is not host:port`, 1},
		{"-brokers http://127.0.0.1:9092", `is not host:port`, 1},
	} {
		t.Run(c.args, func(t *testing.T) {
			out, code := runMain(t, c.args)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Errorf("kafka %s: exit %d, output:\n%s\nwant exit %d and %q", c.args, code, out, c.code, c.want)
			}
			if strings.Contains(out, "== requests") {
				t.Errorf("kafka %s ran the demo:\n%s", c.args, out)
			}
		})
	}
}

func TestParseBrokers(t *testing.T) {
	got, err := parseBrokers(" 127.0.0.1:19092 ,broker-2:9092")
	if err != nil || len(got) != 2 || got[0] != "127.0.0.1:19092" || got[1] != "broker-2:9092" {
		t.Errorf("parseBrokers = %q, %v", got, err)
	}
}

// TestAgainstBroker runs the whole demo against the broker of
// GRAYLB_KAFKA_ADDR (make test's Kafka stage also runs the command).
func TestAgainstBroker(t *testing.T) {
	addr := os.Getenv("GRAYLB_KAFKA_ADDR")
	if addr == "" {
		t.Skip("GRAYLB_KAFKA_ADDR is not set (scripts/kafka.sh start, then GRAYLB_KAFKA_ADDR=127.0.0.1:19092)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, config{brokers: addr}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	t.Log(s)
	if !strings.Contains(s, "kinds: PASS") || strings.Count(s, "stock-gray (gray)") != 2 || strings.Count(s, "stock-prod (prod)") != 4 {
		t.Errorf("want 2 gray and 4 prod records, each handled and served by its kind:\n%s", s)
	}
}
