//go:build race

package badbuildtest

const raceEnabled = true
