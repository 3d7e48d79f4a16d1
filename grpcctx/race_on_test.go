//go:build race

package grpcctx

const raceEnabled = true
