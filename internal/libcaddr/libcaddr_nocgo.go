//go:build !cgo

package libcaddr

// Available reports whether the readings call the C library (built with
// cgo).
const Available = false

// InetAton reads nothing without cgo.
func InetAton(string) (a [4]byte, ok bool) { return a, false }

// GetaddrinfoNumeric reads nothing without cgo.
func GetaddrinfoNumeric(string) (a [4]byte, ok bool) { return a, false }
