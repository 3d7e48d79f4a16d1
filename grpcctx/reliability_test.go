package grpcctx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// reliabilityFragment writes a row for RELIABILITY.md into the folder named
// by GRAYLB_RELIABILITY_OUT (make test-reliability gathers them); without
// it the row only goes to the test log.
func reliabilityFragment(t *testing.T, name, text string) {
	t.Log(text)
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644))
	}
}
