//go:build !race

package graylbkratos_test

const raceEnabled = false
