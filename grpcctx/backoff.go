package grpcctx

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// ReconnectBackoff returns the reconnect back-off DialOptions give a
// ClientConn: after a connection attempt to an instance fails, the next one
// starts 100 ms later, each wait 1.6 times the previous (±20 %), at most
// 500 ms; a connection attempt may take 20 s (grpc-go's default), whatever
// the back-off.
//
// A client keeps dialling an instance that is down for as long as its
// registry lists it: at most about two refused connections a second per
// client, so that an instance back on its address is reached again within
// half a second of its return (docs/traffic.md).
func ReconnectBackoff() grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  100 * time.Millisecond,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   500 * time.Millisecond,
		},
		MinConnectTimeout: 20 * time.Second,
	}
}
