//go:build race

package graylb

const raceEnabled = true
