package bench

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// The harness runs: at share 0 nothing is mirrored, at 10 % about a tenth
// of the GETs is, every copy the same as prod's (the time stamp learned as
// noise), no request fails. A second of each share: it measures nothing.
func TestShadowOverhead_Runs(t *testing.T) {
	s := ShadowSetup{Rate: 200, Round: 500 * time.Millisecond, Rounds: 2, Share: 10, BodySize: 1024}
	rs, err := RunShadowOverhead(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + ShadowTable(s, rs))
	for _, r := range rs {
		if r.Errors > 0 || r.Requests < 100 {
			t.Errorf("share %v: %d requests, %d errors", r.Share, r.Requests, r.Errors)
		}
	}
	if c := rs[1].Copies; c < rs[1].Requests/40 || c > rs[1].Requests/4 {
		t.Errorf("%d copies of %d requests at 10 %%", c, rs[1].Requests)
	}
	if rs[1].NotSame > rs[1].Copies/10 {
		t.Errorf("%d of %d copies not the same as prod's", rs[1].NotSame, rs[1].Copies)
	}
}

// TestShadowOverheadTable measures the prod requests' latency at shadow
// share 0 and 10 % (BENCHMARKS.md): 1000 GETs a second, 20 rounds of 3 s
// of each share, taking turns, about 2 minutes. It runs only when asked:
// GRAYLB_SHADOW_BENCH=1 (GRAYLB_SHADOW_OUT names a file to write the rows
// to; GRAYLB_SHADOW_RATE and GRAYLB_SHADOW_ROUNDS change the load).
func TestShadowOverheadTable(t *testing.T) {
	if os.Getenv("GRAYLB_SHADOW_BENCH") == "" {
		t.Skip("set GRAYLB_SHADOW_BENCH=1 to measure (about 2 minutes)")
	}
	s := ShadowSetup{Rate: 1000, Round: 3 * time.Second, Rounds: 20, Share: 10, BodySize: 1024}
	if v, err := strconv.Atoi(os.Getenv("GRAYLB_SHADOW_RATE")); err == nil && v > 0 {
		s.Rate = v
	}
	if v, err := strconv.Atoi(os.Getenv("GRAYLB_SHADOW_ROUNDS")); err == nil && v > 0 {
		s.Rounds = v
	}
	rs, err := RunShadowOverhead(s)
	if err != nil {
		t.Fatal(err)
	}
	table := ShadowTable(s, rs)
	t.Log("\n" + table)
	if out := os.Getenv("GRAYLB_SHADOW_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []struct {
		name     string
		at0, at1 time.Duration
	}{{"p50", rs[0].P50, rs[1].P50}, {"p99", rs[0].P99, rs[1].P99}} {
		if float64(q.at1) > 1.05*float64(q.at0) {
			t.Logf("%s at %v %%: %s, %.2f × share 0's %s: beyond 1.05", q.name, s.Share, q.at1, float64(q.at1)/float64(q.at0), q.at0)
		}
	}
}
