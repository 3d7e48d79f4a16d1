package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb/bench"
)

// TestLearningSection: a run without the learning section keeps it as it
// was, -only-learning rewrites it alone, and a file without one gets it
// before the Kafka section.
func TestLearningSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	const kafka = "\n## Kafka: records produced and consumed through a broker\n\nkafka table\n"
	const latency = "\n## Latency-aware balancing: y\n\n| b |\n"
	if err := os.WriteFile(path, []byte("# Benchmarks\n"+kafka+latency), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := func(d time.Duration) []bench.LearningResult {
		return []bench.LearningResult{{Services: 2500, Took: d}, {Services: 100_000, Took: 40 * d}}
	}
	check := func(want string) {
		t.Helper()
		b, _ := os.ReadFile(path)
		got := string(b)
		if !strings.Contains(got, want) || strings.Count(got, "## Learning") != 1 || !strings.Contains(got, kafka) ||
			!strings.HasSuffix(got, latency) || strings.Index(got, "## Learning") > strings.Index(got, "## Kafka") {
			t.Errorf("BENCHMARKS.md:\n%s\nwant %q in one learning section before the Kafka section, which is kept", got, want)
		}
	}
	if err := writeLearningOnly(path, learningSection(rows(50*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	check("| 2500 | 50.00 ms | 20.0 µs | 1.00 |")
	if err := writeLearningOnly(path, learningSection(rows(25*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	check("| 100000 | 1.00 s | 10.0 µs | 1.00 |")
	if err := writeMarkdown(path, nil, nil, nil, "", "", "1ms", false, 0); err != nil {
		t.Fatal(err)
	}
	check("| 100000 | 1.00 s | 10.0 µs | 1.00 |")
}
