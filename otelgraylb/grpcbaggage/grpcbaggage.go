// Package grpcbaggage carries graylb's routing values in W3C baggage over
// gRPC: server interceptors that keep the values of a trusted caller's
// baggage for otelgraylb.Handler, and client interceptors that write them
// into the baggage of outgoing calls (opt-in), so a call stays gray
// through services that propagate OpenTelemetry baggage but not graylb's
// metadata.
//
//	lb, _ := graylb.New(sup, graylb.WithContextHandler(grpcctx.Handler(), otelgraylb.Handler()))
//	srv := grpc.NewServer(append(grpcctx.ServerOptions(lb), grpcbaggage.ServerOptions(lb)...)...)
//	conn, _ := grpc.NewClient("graylb:///svc", append(append(grpcctx.DialOptions(lb),
//		grpcbaggage.DialOptions(lb)...), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
package grpcbaggage

import (
	"context"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/otelgraylb"
	"go.opentelemetry.io/otel/baggage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Key is the metadata key of W3C baggage.
const Key = "baggage"

// Option configures the server interceptors.
type Option func(*options)

type options struct {
	lb      *graylb.LoadBalancer
	trusted func(context.Context) bool
}

// WithTrusted marks a trust boundary: for a call for which pred returns
// false, nothing of its baggage routes. The members named by the
// LoadBalancer's keys are removed from the call's incoming baggage
// metadata and from the context's OpenTelemetry baggage, so they neither
// count here nor travel on; other members are left alone. A nil pred
// trusts every call. Use the same predicate as grpcctx.WithTrusted.
func WithTrusted(pred func(ctx context.Context) bool) Option {
	return func(o *options) { o.trusted = pred }
}

func newOptions(lb *graylb.LoadBalancer, opts []Option) *options {
	o := &options{lb: lb}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// parse returns the baggage of the metadata values (an invalid one counts
// as none).
func parse(values []string) baggage.Baggage {
	if len(values) == 0 {
		return baggage.Baggage{}
	}
	b, err := baggage.Parse(strings.Join(values, ","))
	if err != nil {
		return baggage.Baggage{}
	}
	return b
}

func (o *options) keep(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	fromMD := parse(md.Get(Key))
	if o.trusted != nil && !o.trusted(ctx) {
		ctx = baggage.ContextWithBaggage(ctx, otelgraylb.Strip(o.lb, baggage.FromContext(ctx)))
		if len(md.Get(Key)) > 0 {
			md = md.Copy()
			md.Delete(Key)
			if b := otelgraylb.Strip(o.lb, fromMD); b.Len() > 0 {
				md.Set(Key, b.String())
			}
			ctx = metadata.NewIncomingContext(ctx, md)
		}
		return ctx
	}
	ctx = otelgraylb.Keep(ctx, o.lb, baggage.FromContext(ctx))
	return otelgraylb.Keep(ctx, o.lb, fromMD) // the metadata wins over the context's
}

// UnaryServerInterceptor keeps the routing values of each trusted call's
// baggage on its context for otelgraylb.Handler.
func UnaryServerInterceptor(lb *graylb.LoadBalancer, opts ...Option) grpc.UnaryServerInterceptor {
	o := newOptions(lb, opts)
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(o.keep(ctx), req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor(lb *graylb.LoadBalancer, opts ...Option) grpc.StreamServerInterceptor {
	o := newOptions(lb, opts)
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &stream{ServerStream: ss, ctx: o.keep(ss.Context())})
	}
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// ServerOptions returns the server interceptors as server options.
func ServerOptions(lb *graylb.LoadBalancer, opts ...Option) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(lb, opts...)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(lb, opts...)),
	}
}

// outgoing writes the routing values of lb's keys into the call's
// outgoing baggage metadata: for each key the call's metadata, else the
// incoming value the grpcctx server interceptors kept, else the value kept
// from baggage; for the gray key, a kind that rules decided (see
// otelgraylb.Outgoing).
func outgoing(ctx context.Context, lb *graylb.LoadBalancer) context.Context {
	h := grpcctx.Handler()
	values := otelgraylb.Outgoing(ctx, lb, func(name string) string { return h.Value(ctx, name) })
	if len(values) == 0 {
		return ctx
	}
	b := otelgraylb.Merge(parse(metadata.ValueFromOutgoingContext(ctx, Key)), values...)
	if b.Len() == 0 {
		return ctx
	}
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		md = metadata.MD{}
	}
	md.Set(Key, b.String())
	return metadata.NewOutgoingContext(ctx, md)
}

// UnaryClientInterceptor writes the routing values into each call's
// baggage. Chain it after grpcctx's client interceptors (DialOptions after
// grpcctx.DialOptions), so it sees the kind they write.
func UnaryClientInterceptor(lb *graylb.LoadBalancer) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(outgoing(ctx, lb), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams.
func StreamClientInterceptor(lb *graylb.LoadBalancer) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(outgoing(ctx, lb), desc, cc, method, opts...)
	}
}

// DialOptions returns the client interceptors as dial options; pass them
// after grpcctx.DialOptions.
func DialOptions(lb *graylb.LoadBalancer) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(lb)),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(lb)),
	}
}
