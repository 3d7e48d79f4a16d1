//go:build !race

package badbuildtest

const raceEnabled = false
