// A user's program on gozero: zrpc calls to graylb:///user-rpc reach the
// instance of their kind, zrpc's default p2c balancer notwithstanding.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/zeromicro/go-zero/core/conf"
	"github.com/zeromicro/go-zero/core/logx"
	"github.com/zeromicro/go-zero/core/proc"
	"github.com/zeromicro/go-zero/core/service"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

type named struct {
	testgrpc.UnimplementedTestServiceServer
	name string
}

func (n named) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: n.name}, nil
}

func main() {
	logx.Disable()
	defer proc.Shutdown() // stops the zrpc servers (go-zero v1.6.0 and newer)
	defer proc.WrapUp()   // (before v1.6.0)
	reg := graylb.NewRegistry()
	for _, kind := range []string{"prod", "gray"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		addr := l.Addr().(*net.TCPAddr)
		l.Close()
		var c zrpc.RpcServerConf
		if err := conf.FillDefault(&c); err != nil {
			fail(err)
		}
		c.Name, c.Mode, c.DevServer.Enabled, c.ListenOn = "user-rpc", service.DevMode, false, addr.String()
		s, err := zrpc.NewServer(c, func(g *grpc.Server) { testgrpc.RegisterTestServiceServer(g, named{name: kind}) })
		if err != nil {
			fail(err)
		}
		gozero.AddServerInterceptors(s, nil)
		go s.Start()
		// A service registers once it listens: an instance registered
		// before it accepts connections refuses the balancer's first
		// connect, and gray calls fall back to prod until it connects
		// again.
		if err := waitListening(addr.String()); err != nil {
			fail(err)
		}
		if err := reg.Register(graylb.NewInstance("user-rpc", "127.0.0.1", addr.Port,
			map[string]string{"gray": strconv.FormatBool(kind == "gray")})); err != nil {
			fail(err)
		}
	}
	logx.Disable()
	lb, err := graylb.New(reg)
	if err != nil {
		fail(err)
	}
	defer lb.Close()
	var c zrpc.RpcClientConf
	if err := conf.FillDefault(&c); err != nil {
		fail(err)
	}
	c.Target = gozero.Target("user-rpc")
	cli, err := gozero.NewClient(lb, c)
	if err != nil {
		fail(err)
	}
	defer cli.Conn().Close()
	client := testgrpc.NewTestServiceClient(cli.Conn())
	for gray, want := range map[string]string{"true": "gray", "false": "prod", "": "prod"} {
		for i := 0; i < 20; i++ {
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "gray", gray), 10*time.Second)
			r, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
			cancel()
			if err != nil {
				fail(err)
			}
			if r.GetServerId() != want {
				fail(fmt.Errorf("gray: %q went to %q, want %q", gray, r.GetServerId(), want))
			}
		}
	}
	fmt.Println("gozero: gray and prod zrpc calls each reached their kind")
}

// waitListening returns once addr accepts a TCP connection, or an error
// after 10 s.
func waitListening(addr string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			return conn.Close()
		}
	}
	return fmt.Errorf("%s: not listening after 10s", addr)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
