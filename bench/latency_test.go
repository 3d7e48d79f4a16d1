package bench

import (
	"os"
	"testing"
	"time"
)

// TestLatencyTable runs the latency comparison (about 3 x 3 s) and prints
// the markdown table for BENCHMARKS.md; -short skips it. GRAYLB_LATENCY_OUT
// names a file to write the table to.
func TestLatencyTable(t *testing.T) {
	if testing.Short() {
		t.Skip("the latency comparison takes about 10 s")
	}
	s := LatencySetup{Backends: 4, Slow: 20 * time.Millisecond, Clients: 16, Duration: 3 * time.Second}
	rs, err := RunLatency(s)
	if err != nil {
		t.Fatal(err)
	}
	table := LatencyTable(s, rs)
	t.Log("\n" + table)
	if out := os.Getenv("GRAYLB_LATENCY_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rs {
		if r.Errors > 0 {
			t.Errorf("%s: %d errors", r.Name, r.Errors)
		}
	}
	if rs[0].SlowShare == 0 {
		t.Error("round robin never reached the slow backend: the share is not measured")
	}
}
