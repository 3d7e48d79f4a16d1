//go:build race

package graylbkratos_test

// raceEnabled: the race detector is on (sync.Pool drops items at random
// under it, so allocation counts are not the program's).
const raceEnabled = true
