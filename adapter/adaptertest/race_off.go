//go:build !race

package adaptertest

// raceEnabled: the race detector is off.
const raceEnabled = false
