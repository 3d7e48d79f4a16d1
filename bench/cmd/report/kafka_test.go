package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graylb/graylb/bench"
)

func TestSpliceKafka(t *testing.T) {
	const (
		head    = "# Benchmarks\n\ntext\n\n## Memory: x\n\n| a |\n\n"
		latency = "## Latency-aware balancing: y\n\n| b |\n"
		oldK    = "## Kafka: records produced and consumed through a broker\n\nold table\n\n"
		newK    = "## Kafka: records produced and consumed through a broker\n\nnew table\n\n"
	)
	for _, c := range []struct{ name, old, want string }{
		{"replaced in place", head + oldK + latency, head + newK + latency},
		{"inserted before the latency section", head + latency, head + newK + latency},
		{"the last section, replaced", head + oldK, head + newK},
		{"appended without a latency section", head, head + "\n" + newK},
		{"appended to a file without a final newline", "# B", "# B\n\n" + newK},
		{"an empty file", "", "\n" + newK},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spliceKafka(c.old, newK); got != c.want {
				t.Errorf("spliceKafka:\n%q\nwant\n%q", got, c.want)
			}
		})
	}
	if got := keptKafka(head + oldK + latency); got != oldK {
		t.Errorf("keptKafka = %q, want %q", got, oldK)
	}
	if got := keptKafka(head + latency); got != "" {
		t.Errorf("keptKafka without a section = %q", got)
	}
}

// TestWriteMarkdownKeepsKafka: a run without -kafka keeps the Kafka
// section as it was, before the latency section; a run with it replaces it.
func TestWriteMarkdownKeepsKafka(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	const latency = "\n## Latency-aware balancing: y\n\n| b |\n"
	old := "# Benchmarks\n\n## Kafka: records produced and consumed through a broker\n\nold table\n" + latency
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kafka, want string }{
		{"", "\n## Kafka: records produced and consumed through a broker\n\nold table\n" + latency},
		{kafkaSection(bench.KafkaSummary{Cases: make([]bench.KafkaRound, 5), Ratio: []float64{1, 1.03, 1, 1.2, 1.1}, CPURatio: []float64{1, 1.01, 1, 1.05, 1.02}, Rounds: 5}, 20000, 5000), "| kafkagray, gray records | 0 | 0 | 0 | 1.20 | 0 | 1.05 |"},
	} {
		if err := writeMarkdown(path, nil, nil, nil, "", c.kafka, "1ms", false, 0); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		got := string(b)
		if !strings.Contains(got, c.want) || !strings.HasSuffix(got, latency) || strings.Count(got, "## Kafka") != 1 {
			t.Errorf("BENCHMARKS.md:\n%s\nwant it to hold %q, one Kafka section, and end with the latency section", got, c.want)
		}
	}
}
