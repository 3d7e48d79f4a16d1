package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
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
// GRAYLB_SHADOW_BENCH=1 (GRAYLB_SHADOW_OUT names BENCHMARKS.md, whose
// shadow section's table and machine line it rewrites; GRAYLB_SHADOW_RATE
// and GRAYLB_SHADOW_ROUNDS change the load). make bench-shadow runs it.
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
		if err := writeShadowSection(out, s, table); err != nil {
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

// shadowHeading opens BENCHMARKS.md's shadow section.
const shadowHeading = "## Shadow traffic: the prod request's latency"

// writeShadowSection rewrites, in the file at path, the shadow section's
// machine line (the one starting "Measured") and its table.
func writeShadowSection(path string, s ShadowSetup, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(b)
	i := strings.Index(text, shadowHeading)
	if i < 0 {
		return fmt.Errorf("%s has no section %q", path, shadowHeading)
	}
	lines := strings.Split(text[i:], "\n")
	var out []string
	tableDone := false
	for j, l := range lines {
		switch {
		case j > 0 && strings.HasPrefix(l, "## "):
			out = append(out, lines[j:]...)
			return os.WriteFile(path, []byte(text[:i]+strings.Join(out, "\n")), 0o644)
		case strings.HasPrefix(l, "Measured "):
			out = append(out, fmt.Sprintf("Measured %s (%s, %s/%s, GOMAXPROCS %d, CPU: %s): %d GETs a second, %d rounds of %s at each share.",
				time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), cpuModel(), s.Rate, s.Rounds, s.Round))
		case strings.HasPrefix(l, "|"):
			if !tableDone {
				out = append(out, strings.TrimSuffix(table, "\n"))
				tableDone = true
			}
		default:
			out = append(out, l)
		}
	}
	return os.WriteFile(path, []byte(text[:i]+strings.Join(out, "\n")), 0o644)
}

// cpuModel is the CPU's model name as /proc/cpuinfo gives it.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// writeShadowSection rewrites the section's machine line and table, and
// nothing else.
func TestWriteShadowSection(t *testing.T) {
	path := t.TempDir() + "/BENCHMARKS.md"
	before := "# Benchmarks\n\n" + shadowHeading + "\n\nHow it is measured.\n\nMeasured once.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Next\n\nkept\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeShadowSection(path, ShadowSetup{Rate: 5, Rounds: 2, Round: time.Second}, "| x |\n|---|\n| 9 |\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	for _, want := range []string{"How it is measured.\n\nMeasured ", "5 GETs a second, 2 rounds of 1s at each share.\n\n| x |\n|---|\n| 9 |\n\n## Next\n\nkept\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 1 | 2 |") {
		t.Fatalf("the old table is kept:\n%s", got)
	}
}
