// Package grpcctx adapts graylb to gRPC: a ContextHandler over metadata,
// client and server interceptors that pass the gray, user and version keys
// from an incoming call to the calls made while serving it, a resolver for
// nacos:///<service> backed by any graylb Supplier, and a balancer
// registered under Name whose picker runs the graylb chain with each RPC's
// context.
//
// One line per client:
//
//	lb, _ := graylb.New(supplier, graylb.WithContextHandler(grpcctx.Handler()))
//	conn, _ := grpc.NewClient("nacos:///user-service",
//		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
//
// and on servers that call on: grpc.NewServer(grpcctx.ServerOptions()...).
package grpcctx

import (
	"context"
	"strings"

	"github.com/graylb/graylb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

var defaultKeys = []string{graylb.DefaultGrayHeader, graylb.DefaultUserHeader, graylb.DefaultVersionKey}

// DefaultKeys returns the metadata keys propagated by default: gray, uid,
// version.
func DefaultKeys() []string { return append([]string(nil), defaultKeys...) }

// keptKey carries the propagated incoming values on a server's context.
type keptKey struct{}

// Handler returns the ContextHandler over gRPC metadata: the outgoing
// metadata of the call first, then the incoming metadata of the call being
// served (as kept by the server interceptors, else as received).
func Handler() graylb.ContextHandler { return handler{} }

type handler struct{}

func (handler) Value(ctx context.Context, name string) string {
	if v := metadata.ValueFromOutgoingContext(ctx, name); len(v) > 0 && v[0] != "" {
		return v[0]
	}
	if md, ok := ctx.Value(keptKey{}).(metadata.MD); ok {
		if v := md[lower(name)]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// Option configures the interceptors.
type Option func(*options)

type options struct{ keys []string }

// WithKeys sets the metadata keys propagated (default gray, uid, version).
func WithKeys(keys ...string) Option {
	return func(o *options) {
		o.keys = o.keys[:0]
		for _, k := range keys {
			o.keys = append(o.keys, lower(k))
		}
	}
}

func newOptions(opts []Option) *options {
	o := &options{keys: DefaultKeys()}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// keep stores the propagated keys of the incoming metadata on ctx.
func (o *options) keep(ctx context.Context) context.Context {
	in, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	var kept metadata.MD
	for _, k := range o.keys {
		if v := in.Get(k); len(v) > 0 && v[0] != "" {
			if kept == nil {
				kept = metadata.MD{}
			}
			kept[k] = v[:1]
		}
	}
	if kept == nil {
		return ctx
	}
	return context.WithValue(ctx, keptKey{}, kept)
}

// pass appends the kept values the call's outgoing metadata lacks.
func pass(ctx context.Context) context.Context {
	kept, ok := ctx.Value(keptKey{}).(metadata.MD)
	if !ok {
		return ctx
	}
	var kv []string
	for k, v := range kept {
		if len(metadata.ValueFromOutgoingContext(ctx, k)) == 0 {
			kv = append(kv, k, v[0])
		}
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// UnaryServerInterceptor keeps the propagated keys of each incoming call on
// its context.
func UnaryServerInterceptor(opts ...Option) grpc.UnaryServerInterceptor {
	o := newOptions(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(o.keep(ctx), req)
	}
}

// StreamServerInterceptor keeps the propagated keys of each incoming
// stream on its context.
func StreamServerInterceptor(opts ...Option) grpc.StreamServerInterceptor {
	o := newOptions(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &keptStream{ServerStream: ss, ctx: o.keep(ss.Context())})
	}
}

type keptStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *keptStream) Context() context.Context { return s.ctx }

// UnaryClientInterceptor passes the kept incoming keys on to the call.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(pass(ctx), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor passes the kept incoming keys on to the stream.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(pass(ctx), desc, cc, method, opts...)
	}
}

// ServerOptions returns the server interceptors as server options.
func ServerOptions(opts ...Option) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(opts...)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(opts...)),
	}
}
