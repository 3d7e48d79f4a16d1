//go:build race

package adapter_test

const raceEnabled = true
