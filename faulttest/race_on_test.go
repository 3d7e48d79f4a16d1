//go:build race

package faulttest

const raceEnabled = true
