//go:build !race

package gozero_test

const raceEnabled = false
