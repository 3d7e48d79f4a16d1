//go:build !race

package deploytest

const raceEnabled = false
