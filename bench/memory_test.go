package bench

import (
	"os"
	"testing"
)

// TestMemoryPeers runs every memory peer at a small size, so the report's
// table cannot break unnoticed; GRAYLB_BENCH_MEMORY=1 prints the full
// table's figures.
func TestMemoryPeers(t *testing.T) {
	sizes := []MemorySize{{20, 10, false}, {20, 10, true}}
	if os.Getenv("GRAYLB_BENCH_MEMORY") != "" {
		sizes = MemorySizes
	}
	for _, s := range sizes {
		for _, p := range MemoryPeers() {
			r, err := MeasureMemory(p, s, 1)
			if err != nil {
				t.Fatalf("%s at %+v: %v", p.Name, s, err)
			}
			t.Logf("%+v %s: %.0f B per service, %.0f B per instance, %.1f MB", s, p.Name, r.PerService, r.PerInstance, r.Whole/1e6)
		}
	}
}
