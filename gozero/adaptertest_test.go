package gozero_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"github.com/graylb/graylb/gozero"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/core/conf"
	"github.com/zeromicro/go-zero/core/logx"
	"github.com/zeromicro/go-zero/rest"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// go-zero's servers listen on an address of their own (and say nothing of
// a :0 port): each listens on a free port, and adaptertest.Proxy forwards
// the suite's listener to it, so that killing the listener resets its
// callers' connections as a dead process would.

// The conformance suite over go-zero's rest: servers are go-zero rest
// servers with gozero.Middleware; go-zero has no HTTP client of its own
// that picks, so clients are http.Clients over httpctx.NewTransport.
func TestConformanceRest(t *testing.T) {
	adaptertest.Run(t, adaptertest.Driver{
		Name: "gozero-rest",
		Serve: func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o adaptertest.ServerOptions) {
			var c rest.RestConf
			require.NoError(t, conf.FillDefault(&c))
			quiet(&c.ServiceConf, "adaptertest")
			c.Host, c.Port = "127.0.0.1", freePort(t)
			// go-zero's timeout handler runs the route in a goroutine of its
			// own, and its writer's Flush writes to the connection from there
			// without its lock: a streamed answer (CallEnds) whose caller
			// left races with the server finishing the request (the race
			// detector reports it). Without it the route runs as net/http
			// runs a handler.
			c.Timeout = 0
			s, err := rest.NewServer(c)
			require.NoError(t, err)
			logx.Disable()
			s.Use(gozero.Middleware(lb, middlewareOptions(o)...))
			s.AddRoute(rest.Route{Method: http.MethodGet, Path: "/call", Handler: func(w http.ResponseWriter, r *http.Request) {
				a, err := adaptertest.Respond(r.Context(), o, r.Header)
				if f, ok := adaptertest.FaultOf(err); ok {
					http.Error(w, err.Error(), f.HTTPStatus())
					return
				}
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				adaptertest.WriteHTTP(w, r, o, a)
			}})
			addr := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
			done := start(t, addr, s.Start)
			t.Cleanup(func() { stopAll(t, done) })
			adaptertest.Proxy(l, addr)
		},
		Dial: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.Client {
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			return httpClient(&http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}, "http://"+service+"/call")
		},
		Stream: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.StreamClient {
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			return adaptertest.HTTPStream(&http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}, "http://"+service+"/call")
		},
		Direct: func(t *testing.T, addr string) adaptertest.Client {
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			return httpClient(&http.Client{Transport: base}, "http://"+addr+"/call")
		},
		MaxAllocs: 4,
	})
}

// The conformance suite over zrpc: servers are zrpc servers with
// gozero.AddServerInterceptors serving the interop TestService, clients
// gozero.NewClient with go-zero's default client configuration.
func TestConformanceZrpc(t *testing.T) {
	adaptertest.Run(t, adaptertest.Driver{
		Name: "gozero-zrpc",
		Serve: func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o adaptertest.ServerOptions) {
			addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
			c := serverConf(t, "adaptertest", addr)
			// go-zero's server breaker is one per method in the process: the
			// suite's many instances of one process would share it, and one
			// instance's failures would make the others answer Unknown
			// ("circuit breaker is open"). A process is one instance in
			// production.
			c.Middlewares.Breaker = false
			// go-zero's server timeout interceptor answers DeadlineExceeded
			// itself once the caller's propagated deadline passes: an answer
			// racing the caller's own deadline, which makes an instance that
			// hangs (Answers' no-answer) answered or not by a hair. Without
			// it grpc-go ends the stream with no answer.
			c.Timeout = 0
			s, err := zrpc.NewServer(c, func(g *grpc.Server) {
				testgrpc.RegisterTestServiceServer(g, &zrpcAnswering{o: o})
			})
			require.NoError(t, err)
			logx.Disable()
			gozero.AddServerInterceptors(s, lb, interceptorOptions(o)...)
			done := start(t, addr, s.Start)
			t.Cleanup(func() { stopAll(t, done) })
			adaptertest.Proxy(l, addr)
		},
		Dial: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.Client {
			return zrpcCall(conformanceClient(t, lb, service))
		},
		Stream: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.StreamClient {
			return zrpcStream(conformanceClient(t, lb, service))
		},
		Direct: func(t *testing.T, addr string) adaptertest.Client {
			c := clientConf(t, "")
			c.Endpoints = []string{addr}
			cli, err := zrpc.NewClient(c)
			require.NoError(t, err)
			t.Cleanup(func() { cli.Conn().Close() })
			return zrpcCall(testgrpc.NewTestServiceClient(cli.Conn()))
		},
		MaxAllocs: 4,
	})
}

// conformanceClient is gozero.NewClient of service over lb with go-zero's default
// client configuration, its breaker off.
func conformanceClient(t *testing.T, lb *graylb.LoadBalancer, service string) testgrpc.TestServiceClient {
	c := clientConf(t, gozero.Target(service))
	// go-zero's client breaker is one per target and method in the
	// process (TestZrpcBreakerIsSharedByKinds): the suite's subtests
	// dial the same service names one after another, and the
	// failures one subtest provokes made the breaker refuse calls of
	// a later one before any pick (CallObserver/P2C saw 1 of its 2
	// failing calls in a fresh-clone CI run). A program's breaker
	// sees one program's calls.
	c.Middlewares.Breaker = false
	cli, err := gozero.NewClient(lb, c, zrpc.WithDialOption(grpc.WithDefaultServiceConfig(retryOnUnavailable)),
		zrpc.WithDialOption(grpc.WithDefaultCallOptions(grpcctx.Idempotent("/grpc.testing.TestService/UnaryCall", "/grpc.testing.TestService/StreamingOutputCall"))))
	require.NoError(t, err)
	t.Cleanup(func() { cli.Conn().Close() })
	return testgrpc.NewTestServiceClient(cli.Conn())
}

// middlewareOptions are httpctx's options for o.
func middlewareOptions(o adaptertest.ServerOptions) []httpctx.MiddlewareOption {
	var opts []httpctx.MiddlewareOption
	if o.Trusted != nil {
		opts = append(opts, httpctx.WithTrusted(func(r *http.Request) bool { return o.Trusted(r.Header.Get) }))
	}
	if o.User != nil {
		opts = append(opts, httpctx.WithUser(func(r *http.Request) string { return o.User(r.Header.Get) }))
	}
	if len(o.Propagated) > 0 {
		opts = append(opts, httpctx.WithPropagated(o.Propagated...))
	}
	return opts
}

// interceptorOptions are grpcctx's options for o.
func interceptorOptions(o adaptertest.ServerOptions) []grpcctx.Option {
	var opts []grpcctx.Option
	if o.Trusted != nil {
		opts = append(opts, grpcctx.WithTrusted(func(ctx context.Context) bool { return o.Trusted(incoming(ctx)) }))
	}
	if o.User != nil {
		opts = append(opts, grpcctx.WithUser(func(ctx context.Context) string { return o.User(incoming(ctx)) }))
	}
	if len(o.Propagated) > 0 {
		opts = append(opts, grpcctx.WithPropagated(o.Propagated...))
	}
	return opts
}

// incoming reads the call's incoming metadata by name.
func incoming(ctx context.Context) func(string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return func(name string) string {
		if v := md.Get(name); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// zrpcAnswering answers UnaryCall with adaptertest.Respond, the Answer as
// the response's server id (a fault's code for a fault, Internal for
// another error).
type zrpcAnswering struct {
	testgrpc.UnimplementedTestServiceServer
	o adaptertest.ServerOptions
}

func (s *zrpcAnswering) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a, err := adaptertest.Respond(ctx, s.o, md)
	if f, ok := adaptertest.FaultOf(err); ok {
		return nil, status.Error(codes.Code(f.GRPCCode()), err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &testgrpc.SimpleResponse{ServerId: string(a.Encode())}, nil
}

// StreamingOutputCall answers with adaptertest.Respond: the Answer as its
// first message, then a second one as adaptertest.RestOf says.
func (s *zrpcAnswering) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	ctx := stream.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	a, err := adaptertest.Respond(ctx, s.o, md)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: a.Encode()}}); err != nil {
		return err
	}
	switch adaptertest.RestOf(s.o) {
	case adaptertest.RestLate:
		select {
		case <-time.After(adaptertest.RestDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	case adaptertest.RestStall:
		<-ctx.Done()
		return ctx.Err()
	case adaptertest.RestBreak:
		return status.Error(codes.Unavailable, "adaptertest: the answer breaks off")
	}
	return stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte("rest")}})
}

// zrpcStream calls StreamingOutputCall with c, the keys as outgoing
// metadata: the Answer is the first message; whole reads the stream to its
// end, else the stream is cancelled.
func zrpcStream(c testgrpc.TestServiceClient) adaptertest.StreamClient {
	return func(ctx context.Context, keys map[string]string, whole bool) (adaptertest.Answer, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for k, v := range keys {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v)
		}
		st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			return adaptertest.Answer{}, err
		}
		m, err := st.Recv()
		if err != nil {
			return adaptertest.Answer{}, err
		}
		a, err := adaptertest.ParseAnswer(m.GetPayload().GetBody())
		if err != nil || !whole {
			return a, err // cancelled before its end
		}
		for {
			if _, err := st.Recv(); err == io.EOF {
				return a, nil
			} else if err != nil {
				return a, err
			}
		}
	}
}

// zrpcCall calls UnaryCall with c, the keys as outgoing metadata.
func zrpcCall(c testgrpc.TestServiceClient) adaptertest.Client {
	return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
		for k, v := range keys {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v)
		}
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if err != nil {
			return adaptertest.Answer{}, err
		}
		return adaptertest.ParseAnswer([]byte(r.GetServerId()))
	}
}

// httpClient calls GET url with c, the keys as headers.
func httpClient(c *http.Client, url string) adaptertest.Client {
	return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return adaptertest.Answer{}, err
		}
		for k, v := range keys {
			req.Header.Add(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return adaptertest.Answer{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return adaptertest.Answer{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return adaptertest.Answer{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return adaptertest.ParseAnswer(b)
	}
}

// retryOnUnavailable is graylb's service config with the retry policy
// docs/grpc.md advises for idempotent methods: an RPC sent to an instance
// as it dies, before its connection's loss is read, goes to another.
const retryOnUnavailable = `{"loadBalancingConfig":[{"graylb":{}}],"methodConfig":[{"name":[{}],` +
	`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`
