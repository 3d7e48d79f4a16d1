//go:build !race

package kratosnacos_test

const raceEnabled = false
