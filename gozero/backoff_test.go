package gozero_test

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// A reconnect back-off the caller gives NewClient (grpc.WithConnectParams)
// applies, as the caller's service config does: graylb's
// (grpcctx.ReconnectBackoff, 100 ms growing to 500 ms) comes before the
// caller's options. The only instance accepts each connection and closes
// it: with the caller's 3 s back-off the ClientConn dials it once in the
// first 1.5 s, with graylb's five or six times.
func TestNewClientKeepsTheCallersReconnectBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("refusing", "127.0.0.1", port, map[string]string{"gray": strconv.FormatBool(false)})))
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()

	slow := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 3 * time.Second, Multiplier: 1, MaxDelay: 3 * time.Second},
		MinConnectTimeout: time.Second,
	})
	conf := clientConf(t, gozero.Target("refusing"))
	conf.NonBlock = true
	c, err := gozero.NewClient(lb, conf, zrpc.WithDialOption(slow))
	require.NoError(t, err)
	defer c.Conn().Close()
	c.Conn().Connect()
	require.Eventually(t, func() bool { return dials.Load() > 0 }, 5*time.Second, time.Millisecond, "no dial")
	first := time.Now()
	time.Sleep(time.Until(first.Add(1500 * time.Millisecond))) // must sleep: no dial may come in a window shorter than the caller's back-off
	require.LessOrEqual(t, dials.Load(), int64(1), "dials within 1.5 s of the first: the caller's 3 s back-off was replaced")
}
