package graylbkratos_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/go-kratos/kratos/v2/selector/wrr"
	"github.com/go-kratos/kratos/v2/transport"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	graylbkratos "github.com/graylb/graylb/kratos"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The conformance suite over Kratos' HTTP transport: servers are Kratos
// HTTP servers with graylbkratos.Server, clients Kratos HTTP clients of
// discovery:///<service> with graylbkratos.Client, picking with a
// graylbkratos Selector.
func TestConformanceHTTP(t *testing.T) {
	selector.SetGlobalSelector(dispatcher) // before any client of the test is made
	adaptertest.Run(t, kratosDriver("kratos-http", "http"))
}

// The conformance suite over Kratos' gRPC transport, as over HTTP.
func TestConformanceGRPC(t *testing.T) {
	selector.SetGlobalSelector(dispatcher)
	adaptertest.Run(t, kratosDriver("kratos-grpc", "grpc"))
}

func kratosDriver(name, scheme string) adaptertest.Driver {
	return adaptertest.Driver{
		Name: name,
		Serve: func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o adaptertest.ServerOptions) {
			serveKratos(t, scheme, l, o, graylbkratos.Server(lb, kratosOptions(o)...))
		},
		Dial: func(t *testing.T, reg *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.Client {
			b := graylbkratos.NewBuilder(lb)
			t.Cleanup(b.Close)
			c := kratosClient(t, scheme, "discovery:///"+service, graylbkratos.NewDiscovery(reg),
				graylbkratos.Client(lb, graylbkratos.WithIdempotent("/grpc.testing.TestService/UnaryCall")))
			return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
				return c(context.WithValue(ctx, builderKey{}, b), keys)
			}
		},
		Stream: func(t *testing.T, reg *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.StreamClient {
			b := graylbkratos.NewBuilder(lb)
			t.Cleanup(b.Close)
			c := kratosStream(t, scheme, "discovery:///"+service, graylbkratos.NewDiscovery(reg),
				graylbkratos.Client(lb, graylbkratos.WithIdempotent("/grpc.testing.TestService/StreamingOutputCall")))
			return func(ctx context.Context, keys map[string]string, whole bool) (adaptertest.Answer, error) {
				return c(context.WithValue(ctx, builderKey{}, b), keys, whole)
			}
		},
		Direct: func(t *testing.T, addr string) adaptertest.Client {
			c := kratosClient(t, scheme, addr, nil)
			return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
				// The dispatcher's context value, as Dial's, so that the
				// Allocations subtest does not count it.
				return c(context.WithValue(ctx, builderKey{}, (*graylbkratos.Builder)(nil)), keys)
			}
		},
		MaxAllocs: 4,
		Lacks:     lacks[scheme],
	}
}

// lacks are what Kratos' clients cannot do, by scheme.
var lacks = map[string]map[adaptertest.Capability]string{
	"http": {
		adaptertest.RetryOnDeath: "Kratos' HTTP client sends a call once, and its selector is handed the nodes " +
			"discovery lists: an instance that died but is still listed keeps being picked, its calls refused, " +
			"until outlier detection ejects it",
		adaptertest.Abandon: "Kratos' HTTP client reads and decodes the whole body inside Invoke: its caller " +
			"cannot abandon an answer part-way",
	},
}

// dispatcher is the test binary's global selector. Kratos' clients take
// their selector from the global one only, and its gRPC clients build one
// each time their ready connections change, so one graylbkratos.Builder
// cannot be set per client: each call carries the Builder of the
// LoadBalancer its client was made over on its context (builderKey), and
// the dispatched Selector hands the call to a Selector that Builder built,
// applied with the same nodes. A call without one (Direct's) picks with
// Kratos' default selector.
var dispatcher selector.Builder = builderFunc(func() selector.Selector {
	return &dispatched{plain: wrr.NewBuilder().Build(), sels: map[*graylbkratos.Builder]selector.Selector{}}
})

type builderKey struct{}

type builderFunc func() selector.Selector

func (f builderFunc) Build() selector.Selector { return f() }

type dispatched struct {
	mu    sync.Mutex
	nodes []selector.Node
	plain selector.Selector
	sels  map[*graylbkratos.Builder]selector.Selector
}

func (d *dispatched) Apply(nodes []selector.Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodes = nodes
	d.plain.Apply(nodes)
	for _, s := range d.sels {
		s.Apply(nodes)
	}
}

func (d *dispatched) Select(ctx context.Context, opts ...selector.SelectOption) (selector.Node, selector.DoneFunc, error) {
	b, _ := ctx.Value(builderKey{}).(*graylbkratos.Builder)
	d.mu.Lock()
	s := d.plain
	if b != nil {
		if s = d.sels[b]; s == nil {
			s = b.Build()
			s.Apply(d.nodes)
			d.sels[b] = s
		}
	}
	d.mu.Unlock()
	return s.Select(ctx, opts...)
}

// kratosOptions are graylbkratos' options for o.
func kratosOptions(o adaptertest.ServerOptions) []graylbkratos.Option {
	var opts []graylbkratos.Option
	if o.Trusted != nil {
		opts = append(opts, graylbkratos.WithTrusted(func(ctx context.Context) bool { return o.Trusted(requestHeader(ctx).Get) }))
	}
	if o.User != nil {
		opts = append(opts, graylbkratos.WithUser(func(ctx context.Context) string { return o.User(requestHeader(ctx).Get) }))
	}
	if len(o.Propagated) > 0 {
		opts = append(opts, graylbkratos.WithPropagated(o.Propagated...))
	}
	return opts
}

// requestHeader is the served call's Kratos transport header.
func requestHeader(ctx context.Context) transport.Header {
	if tr, ok := transport.FromServerContext(ctx); ok {
		return tr.RequestHeader()
	}
	return emptyHeader{}
}

type emptyHeader struct{}

func (emptyHeader) Get(string) string      { return "" }
func (emptyHeader) Set(string, string)     {}
func (emptyHeader) Add(string, string)     {}
func (emptyHeader) Keys() []string         { return nil }
func (emptyHeader) Values(string) []string { return nil }

// respond answers the call served with ctx with adaptertest.Respond over
// the call's transport header (a Kratos error of a fault's HTTP status
// for a fault, which its gRPC transport sends as the matching code; a 500
// for another error).
func respond(ctx context.Context, o adaptertest.ServerOptions) (adaptertest.Answer, error) {
	h := requestHeader(ctx)
	received := map[string][]string{}
	for _, k := range h.Keys() {
		received[k] = h.Values(k)
	}
	a, err := adaptertest.Respond(ctx, o, received)
	if f, ok := adaptertest.FaultOf(err); ok {
		return a, kerrors.New(f.HTTPStatus(), "ADAPTERTEST", err.Error())
	}
	if err != nil {
		return a, kerrors.InternalServer("ADAPTERTEST", err.Error())
	}
	return a, nil
}

// serveKratos serves on l a Kratos server of scheme with the middleware
// mw, its one route (GET /call, the TestService's UnaryCall) answering
// with respond.
func serveKratos(t *testing.T, scheme string, l net.Listener, o adaptertest.ServerOptions, mw middleware.Middleware) {
	ctx := context.Background()
	var start, stop func(context.Context) error
	switch scheme {
	case "http":
		srv := khttp.NewServer(khttp.Listener(l), khttp.Middleware(mw))
		srv.Route("/").GET("/call", func(c khttp.Context) error {
			h := c.Middleware(func(ctx context.Context, _ interface{}) (interface{}, error) { return respond(ctx, o) })
			out, err := h(c, nil)
			if err != nil {
				return err
			}
			adaptertest.WriteHTTP(c.Response(), c.Request(), o, out.(adaptertest.Answer))
			return nil
		})
		start, stop = srv.Start, srv.Stop
	case "grpc":
		srv := kgrpc.NewServer(kgrpc.Listener(l), kgrpc.Middleware(mw))
		testgrpc.RegisterTestServiceServer(srv, &kratosAnswering{o: o})
		start, stop = srv.Start, srv.Stop
	}
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		stop(ctx)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("a Kratos %s server did not stop within 5s", scheme)
		}
	})
}

type kratosAnswering struct {
	testgrpc.UnimplementedTestServiceServer
	o adaptertest.ServerOptions
}

func (s *kratosAnswering) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	a, err := respond(ctx, s.o)
	if err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{ServerId: string(a.Encode())}, nil
}

// StreamingOutputCall answers with respond: the Answer as its first
// message, then a second one as adaptertest.RestOf says.
func (s *kratosAnswering) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	ctx := stream.Context()
	a, err := respond(ctx, s.o)
	if err != nil {
		return err
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

// kratosStream returns a StreamClient of scheme to endpoint through d: over
// HTTP, Invoke of GET /call, which reads the whole body (it cannot abandon
// one); over gRPC, StreamingOutputCall (the Answer is the first message;
// whole reads the stream to its end, else it is cancelled).
func kratosStream(t *testing.T, scheme, endpoint string, d *graylbkratos.Discovery, ms ...middleware.Middleware) adaptertest.StreamClient {
	t.Helper()
	if scheme == "http" {
		c := kratosClient(t, scheme, endpoint, d, ms...)
		return func(ctx context.Context, keys map[string]string, _ bool) (adaptertest.Answer, error) {
			return c(ctx, keys)
		}
	}
	conn, err := kgrpc.DialInsecure(context.Background(), kgrpc.WithEndpoint(endpoint), kgrpc.WithDiscovery(d), kgrpc.WithSubset(0),
		kgrpc.WithMiddleware(append([]middleware.Middleware{withKeys}, ms...)...), kgrpc.WithOptions(grpc.WithDefaultServiceConfig(idempotent)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := testgrpc.NewTestServiceClient(conn)
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

// idempotent is Kratos' own service config (its selector balancer, health
// checks) with UNAVAILABLE retried, as a client whose methods are
// idempotent sets it (docs/grpc.md): without it an RPC sent to an instance
// as it dies fails. The suite's servers answer their server error with
// Internal (Kratos' 500), which is not retried.
const idempotent = `{"loadBalancingConfig":[{"selector":{}}],"healthCheckConfig":{"serviceName":""},` +
	`"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],` +
	`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

type keysKey struct{}

// withKeys writes the call's keys (keysKey) on its Kratos request header,
// as a program's client middleware does.
func withKeys(next middleware.Handler) middleware.Handler {
	return func(ctx context.Context, req interface{}) (interface{}, error) {
		if tr, ok := transport.FromClientContext(ctx); ok {
			keys, _ := ctx.Value(keysKey{}).(map[string]string)
			for k, v := range keys {
				tr.RequestHeader().Add(k, v)
			}
		}
		return next(ctx, req)
	}
}

// kratosClient returns a Kratos client of scheme to endpoint (through d
// when not nil), its middleware withKeys then ms.
func kratosClient(t *testing.T, scheme, endpoint string, d *graylbkratos.Discovery, ms ...middleware.Middleware) adaptertest.Client {
	t.Helper()
	ctx := context.Background()
	ms = append([]middleware.Middleware{withKeys}, ms...)
	var call func(ctx context.Context) (adaptertest.Answer, error)
	switch scheme {
	case "http":
		opts := []khttp.ClientOption{khttp.WithEndpoint(endpoint), khttp.WithMiddleware(ms...), khttp.WithTimeout(10 * time.Second)}
		if d != nil {
			opts = append(opts, khttp.WithDiscovery(d), khttp.WithSubset(0), khttp.WithBlock())
		}
		c, err := khttp.NewClient(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		call = func(ctx context.Context) (adaptertest.Answer, error) {
			var a adaptertest.Answer
			err := c.Invoke(ctx, "GET", "/call", nil, &a)
			return a, err
		}
	case "grpc":
		opts := []kgrpc.ClientOption{kgrpc.WithEndpoint(endpoint), kgrpc.WithMiddleware(ms...), kgrpc.WithTimeout(10 * time.Second),
			kgrpc.WithOptions(grpc.WithDefaultServiceConfig(idempotent))}
		if d != nil {
			opts = append(opts, kgrpc.WithDiscovery(d), kgrpc.WithSubset(0))
		}
		conn, err := kgrpc.DialInsecure(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c := testgrpc.NewTestServiceClient(conn)
		call = func(ctx context.Context) (adaptertest.Answer, error) {
			r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			if err != nil {
				return adaptertest.Answer{}, err
			}
			return adaptertest.ParseAnswer([]byte(r.GetServerId()))
		}
	default:
		t.Fatalf("scheme %q", scheme)
	}
	return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
		a, err := call(context.WithValue(ctx, keysKey{}, keys))
		if err == nil && a.Instance == "" {
			err = errors.New("an answer without an instance")
		}
		return a, err
	}
}
