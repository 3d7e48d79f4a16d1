//go:build !unix

package bench

import "time"

// processCPU is 0 where the process' CPU time is not read.
func processCPU() time.Duration { return 0 }
