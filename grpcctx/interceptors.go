package grpcctx

import (
	"context"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Option configures the server interceptors.
type Option func(*options)

type options struct {
	lb      *adapter.Balancer
	keys    []string // propagated, lower case: lb's keys, then the extra ones (match keys aside)
	userKey string
	trusted func(context.Context) bool
	user    func(context.Context) string
}

// WithPropagated adds metadata keys propagated beside the LoadBalancer's
// keys. They count as routing keys at the trust boundary too.
func WithPropagated(keys ...string) Option {
	return func(o *options) {
		for _, k := range keys {
			if k = lower(k); k != "" && !contains(o.keys, k) {
				o.keys = append(o.keys, k)
			}
		}
	}
}

// WithTrusted marks a trust boundary (a server facing untrusted peers):
// for a call for which pred returns false, no routing key the caller sent
// (the LoadBalancer's gray, user and version keys, the keys its match
// rules in force name, and WithPropagated keys) is kept or propagated, and they are removed from the call's incoming
// metadata before the handler sees it. pred sees the call's context (peer,
// auth info: peer.FromContext). A nil pred trusts every call.
func WithTrusted(pred func(ctx context.Context) bool) Option {
	return func(o *options) { o.trusted = pred }
}

// WithUser sets where the user id comes from: fn returns the authenticated
// user of the call ("" for none). Its value is the call's user id for
// routing and is propagated under the LoadBalancer's user key. With
// WithUser the user id comes from fn alone: the caller's metadata under the
// user key, trusted or not, is replaced by fn's value in the incoming
// metadata too (removed when it is "").
func WithUser(fn func(ctx context.Context) string) Option {
	return func(o *options) { o.user = fn }
}

func newOptions(lb *graylb.LoadBalancer, opts []Option) *options {
	keys := lb.Keys()
	keys.Match = nil // read per call: rules change at run time
	o := &options{lb: adapter.For(lb), userKey: lower(keys.User)}
	WithPropagated(keys.Names()...)(o)
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// keep stores the propagated keys of the incoming metadata on ctx; for an
// untrusted call it strips them from the incoming metadata instead.
func (o *options) keep(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	match := o.lb.MatchKeys() // lower case, as metadata keys
	if o.trusted != nil && !o.trusted(ctx) && in != nil {
		clean := metadata.MD{}
		for k, v := range in {
			if lk := lower(k); !contains(o.keys, lk) && !contains(match, lk) {
				clean[k] = v
			}
		}
		ctx, in = metadata.NewIncomingContext(ctx, clean), nil
		ctx = graylb.WithUntrustedCaller(ctx)
	}
	if o.user != nil {
		// The program's user id replaces whatever the caller sent under
		// the user key, also in the incoming metadata a handler may copy.
		u := o.user(ctx)
		md := metadata.MD{}
		for k, v := range in {
			if lower(k) != o.userKey {
				md[k] = v
			}
		}
		if u != "" {
			md[o.userKey] = []string{u}
		}
		ctx, in = metadata.NewIncomingContext(ctx, md), md
	}
	var kept metadata.MD
	keep := func(k string) {
		if v := in.Get(k); len(v) > 0 && v[0] != "" {
			if kept == nil {
				kept = metadata.MD{}
			}
			kept[k] = v[:1]
		}
	}
	for _, k := range o.keys {
		keep(k)
	}
	for _, k := range match {
		if !contains(o.keys, k) {
			keep(k)
		}
	}
	if kept == nil {
		return ctx
	}
	return context.WithValue(ctx, keptKey{}, kept)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// UnaryServerInterceptor keeps the propagated keys of each incoming call on
// its context.
func UnaryServerInterceptor(lb *graylb.LoadBalancer, opts ...Option) grpc.UnaryServerInterceptor {
	o := newOptions(lb, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(o.keep(ctx), req)
	}
}

// StreamServerInterceptor keeps the propagated keys of each incoming
// stream on its context.
func StreamServerInterceptor(lb *graylb.LoadBalancer, opts ...Option) grpc.StreamServerInterceptor {
	o := newOptions(lb, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &keptStream{ServerStream: ss, ctx: o.keep(ss.Context())})
	}
}

type keptStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *keptStream) Context() context.Context { return s.ctx }

// ServerOptions returns the server interceptors as server options. lb
// names the keys (nil: the default names); a server that makes no calls of
// its own may pass nil.
func ServerOptions(lb *graylb.LoadBalancer, opts ...Option) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(lb, opts...)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(lb, opts...)),
	}
}

// outgoing prepares a call's context: the kept incoming values the call's
// outgoing metadata lacks are appended, and when lb's rules (a gray user,
// a match rule, the canary), a context value or the caller's own flag
// decided the kind, the kind is written under the gray key, and a lane a
// match rule gave the call under the version key. The picker then reads
// those keys, so the decision is made once per call, and every later hop
// routes the same way.
//
// Everything is appended at once (each append costs a context and three
// allocations): the kept values, then the decision.
func outgoing(ctx context.Context, lb *adapter.Balancer, grayKey, versionKey string) context.Context {
	var kv []string
	if kept, ok := ctx.Value(keptKey{}).(metadata.MD); ok {
		for k, v := range kept {
			if len(metadata.ValueFromOutgoingContext(ctx, k)) == 0 {
				kv = append(kv, k, v[0])
			}
		}
	}
	if lb == nil {
		if len(kv) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		}
		return ctx
	}
	// The decision for the next hop, under the lower-case metadata keys.
	// (The handler reads the kept values behind the call's own, as they
	// go out.)
	p := lb.PassFor(ctx, handler{})
	var pairs [4]string // the decision's pairs, on the stack when alone
	add := pairs[:0]
	if p.GrayKey != "" {
		add = append(add, grayKey, p.Gray)
	}
	if p.VersionKey != "" {
		add = append(add, versionKey, p.Version)
	}
	switch {
	case len(kv) > 0:
		ctx = metadata.AppendToOutgoingContext(ctx, append(kv, add...)...)
	case len(add) > 0:
		ctx = metadata.AppendToOutgoingContext(ctx, add...)
	}
	return ctx
}

// UnaryClientInterceptor passes the kept incoming keys on to the call and
// writes the kind lb's rules decided (see DialOptions).
func UnaryClientInterceptor(lb *graylb.LoadBalancer) grpc.UnaryClientInterceptor {
	keys := lb.Keys()
	grayKey, versionKey := lower(keys.Gray), lower(keys.Version)
	ab := adapter.For(lb)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(outgoing(ctx, ab, grayKey, versionKey), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams.
func StreamClientInterceptor(lb *graylb.LoadBalancer) grpc.StreamClientInterceptor {
	keys := lb.Keys()
	grayKey, versionKey := lower(keys.Gray), lower(keys.Version)
	ab := adapter.For(lb)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(outgoing(ctx, ab, grayKey, versionKey), desc, cc, method, opts...)
	}
}
