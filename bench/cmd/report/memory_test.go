package main

import (
	"strings"
	"testing"

	"github.com/graylb/graylb/bench"
)

func TestWriteMemory(t *testing.T) {
	n := len(bench.MemorySizes)
	r := memoryRow{peer: "p", results: make([]bench.MemoryResult, n), errs: make([]string, n)}
	r.results[0] = bench.MemoryResult{PerService: 1870, PerInstance: 187, Whole: 1.87e6}
	r.results[n-1] = bench.MemoryResult{PerService: 26846, PerInstance: 2684, Whole: 268.46e6}
	var b strings.Builder
	writeMemory(&b, []memoryRow{r})
	out := b.String()
	for _, want := range []string{"## Memory", "| 1000 × 10 | 1000 × 10, versions |", "| p | 1870 B / 187 B |", "26.8 KB / 2684 B | 268.5 MB |"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	var empty strings.Builder
	writeMemory(&empty, nil)
	if empty.Len() != 0 {
		t.Error("no rows, no section")
	}
}
