package deploytest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb/nacos"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// The protocols an instance serves, indexes of its per-protocol figures.
const (
	protoHTTP = iota
	protoGRPC
)

// registerTimeout bounds an instance's registration, retries included (a
// server that is restarting refuses it for a while).
const registerTimeout = 30 * time.Second

// instance is one deployed process: an HTTP server and a gRPC server on
// loopback, each registered in Nacos (services <name>-http and
// <name>-grpc) through nacos.Register on the process's own Client, as a
// service that speaks both registers itself. Both answer "<name> <kind>",
// the kind it is registered as when it answers.
type instance struct {
	t      *testing.T
	name   string
	svc    string // the service's base name
	addr   string // Nacos
	gray   atomic.Bool
	client *nacos.Client
	http   *http.Server
	grpc   *grpc.Server
	ports  [2]int

	mu   sync.Mutex
	regs []*nacos.Registration

	// first and last request served, per protocol (unix nanos)
	first, last [2]atomic.Int64
}

// answer is what the instance says to a request: its name and kind.
func (in *instance) answer(proto int) string {
	now := time.Now().UnixNano()
	in.first[proto].CompareAndSwap(0, now)
	in.last[proto].Store(now)
	if in.gray.Load() {
		return in.name + " gray"
	}
	return in.name + " prod"
}

type grpcService struct {
	testgrpc.UnimplementedTestServiceServer
	in *instance
}

func (s grpcService) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: s.in.answer(protoGRPC)}, nil
}

func (s grpcService) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, st testgrpc.TestService_StreamingOutputCallServer) error {
	return st.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(s.in.answer(protoGRPC))}})
}

// startInstance starts the servers of a new instance, then registers
// them, retrying while the server refuses (it may be restarting).
func startInstance(t *testing.T, addr, svc, name string, gray bool) *instance {
	t.Helper()
	in := &instance{t: t, name: name, svc: svc, addr: addr}
	in.gray.Store(gray)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	in.ports = [2]int{hl.Addr().(*net.TCPAddr).Port, gl.Addr().(*net.TCPAddr).Port}
	in.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, in.answer(protoHTTP))
	})}
	go in.http.Serve(hl)
	in.grpc = grpc.NewServer()
	testgrpc.RegisterTestServiceServer(in.grpc, grpcService{in: in})
	go in.grpc.Serve(gl)
	t.Cleanup(func() { in.http.Close(); in.grpc.Stop() })

	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	in.client, err = nacos.NewClient(ctx, clientOpts(t, addr)...)
	require.NoError(t, err)
	t.Cleanup(func() { in.client.Close() })
	in.register(ctx)
	return in
}

// register registers both servers with the instance's current kind,
// retrying while the server refuses or is unreachable.
func (in *instance) register(ctx context.Context) {
	in.t.Helper()
	gray := in.gray.Load()
	regs := make([]*nacos.Registration, 2)
	for i, suffix := range []string{"-http", "-grpc"} {
		var err error
		retry := time.NewTicker(100 * time.Millisecond)
		for {
			regs[i], err = nacos.Register(ctx, nacos.Service{Name: in.svc + suffix, Host: "127.0.0.1", Port: in.ports[i], Gray: &gray},
				nacos.WithClient(in.client))
			if err == nil || ctx.Err() != nil {
				break
			}
			select { // tried again every 100 ms until ctx ends
			case <-retry.C:
			case <-ctx.Done():
			}
		}
		retry.Stop()
		require.NoError(in.t, err, "registering %s%s", in.name, suffix)
	}
	in.mu.Lock()
	in.regs = regs
	in.mu.Unlock()
	in.t.Cleanup(func() {
		for _, r := range regs {
			r.Close()
		}
	})
}

// deregister deregisters both servers at once, each waiting the drain
// wait: the instance is off the registry and clients have had the time to
// see it when it returns. It returns the first error.
func (in *instance) deregister(ctx context.Context) error {
	in.mu.Lock()
	regs := in.regs
	in.mu.Unlock()
	errs := make([]error, len(regs))
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = r.Deregister(ctx) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopTimes is when a graceful stop began and when Deregister returned.
type stopTimes struct {
	begin, deregistered time.Time
	err                 error // Deregister's
}

// stopGracefully is the graceful stop: deregister, wait (Deregister's
// drain wait), then stop serving, letting requests in flight finish, and
// close the Nacos client.
func (in *instance) stopGracefully() stopTimes {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := stopTimes{begin: time.Now()}
	st.err = in.deregister(ctx)
	st.deregistered = time.Now()
	in.http.Shutdown(ctx)
	in.grpc.GracefulStop()
	in.client.Close()
	return st
}

// kill is an abrupt stop, as kill -9 leaves it: both servers close every
// connection at once and refuse new ones, and the Nacos connection ends
// without a deregistration (the server drops the instance when it sees
// the connection go).
func (in *instance) kill() {
	in.http.Close()
	in.grpc.Stop()
	in.client.Close()
}

// lastServed is the time of the last request served over proto.
func (in *instance) lastServed(proto int) time.Time { return unixNano(in.last[proto].Load()) }

// firstServed is the time of the first request served over proto.
func (in *instance) firstServed(proto int) time.Time { return unixNano(in.first[proto].Load()) }

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
