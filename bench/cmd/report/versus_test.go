package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersusSection: -only-versus rewrites the grpc-go table, with the CPU
// on every row, and keeps everything else, the peers' paragraph after it
// included.
func TestVersusSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := writeMarkdown(path, nil, []versusRow{{n: 10, byName: 20, grpc: 19, ratio: 1.05}}, nil, "", "", "1ms", false, 0); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if err := writeVersusOnly(path, []versusRow{{n: 10, byName: 18, grpc: 20, ratio: 0.9}, {n: 100, byName: 19, grpc: 21, ratio: 0.9}}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	got := string(after)
	for _, want := range []string{"| 10 | 18.0 | 0.90 |", "| 100 | 19.0 | 0.90 |", "| " + cpuModel() + " |", "\n\nPeers: graylb's pick"} {
		if !strings.Contains(got, want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 10 | 20.0 |") || strings.Count(got, "## graylb against") != 1 {
		t.Errorf("the old table is left:\n%s", got)
	}
	i, j := strings.Index(string(before), "\n\nPeers: "), strings.Index(got, "\n\nPeers: ")
	if string(before)[i:] != got[j:] {
		t.Errorf("what follows the table changed:\n%s", got)
	}
}
