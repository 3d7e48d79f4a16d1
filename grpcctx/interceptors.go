package grpcctx

import (
	"context"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/shadow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Option configures the server interceptors.
type Option func(*options)

type options struct {
	extra   []string // WithPropagated keys
	trusted func(context.Context) bool
	user    func(context.Context) string
}

// WithPropagated adds metadata keys propagated beside the LoadBalancer's
// keys. They count as routing keys at the trust boundary too.
func WithPropagated(keys ...string) Option {
	return func(o *options) { o.extra = append(o.extra, keys...) }
}

// WithTrusted marks a trust boundary (a server facing untrusted peers):
// for a call for which pred returns false, no routing key the caller sent
// (the LoadBalancer's gray, user and version keys, the keys its match
// rules in force name, and WithPropagated keys) is kept or propagated, and
// they are removed from the call's incoming metadata before the handler
// sees it. pred sees the call's context (peer, auth info:
// peer.FromContext). A nil pred trusts every call.
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

// admission admits the server's incoming calls.
type admission struct {
	adm     *adapter.Admitter
	trusted func(context.Context) bool
	user    func(context.Context) string
}

func newAdmission(lb *graylb.LoadBalancer, opts []Option) *admission {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return &admission{adm: adapter.For(lb).Admitter(o.extra...), trusted: o.trusted, user: o.user}
}

// keep admits the call served with ctx (adapter.Admitter): its routing
// keys become the request's routing state; an untrusted call's are
// removed from its incoming metadata instead.
func (a *admission) keep(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	c := &mdCarrier{md: in}
	var how adapter.Admission
	if a.trusted != nil && !a.trusted(ctx) {
		how.Untrusted = true
	}
	how.User = a.user
	return c.Context(a.adm.Admit(ctx, c, how))
}

// mdCarrier is a call's incoming metadata as an adapter.Carrier: the
// metadata is copied before its first change, so the caller's is never
// modified.
type mdCarrier struct {
	md     metadata.MD
	copied bool
}

func (c *mdCarrier) Get(name string) string {
	if v := c.md[lower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c *mdCarrier) own() {
	if !c.copied {
		md := make(metadata.MD, len(c.md))
		for k, v := range c.md {
			md[k] = v
		}
		c.md, c.copied = md, true
	}
}

func (c *mdCarrier) Set(name, value string) {
	c.own()
	c.md[lower(name)] = []string{value}
}

func (c *mdCarrier) Delete(name string) {
	for k := range c.md {
		if strings.EqualFold(k, name) {
			c.own()
			delete(c.md, k)
		}
	}
}

// Context returns ctx carrying the metadata as the carrier's changes left
// it.
func (c *mdCarrier) Context(ctx context.Context) context.Context {
	if c.copied {
		return metadata.NewIncomingContext(ctx, c.md)
	}
	return ctx
}

// UnaryServerInterceptor keeps the propagated keys of each incoming call on
// its context.
func UnaryServerInterceptor(lb *graylb.LoadBalancer, opts ...Option) grpc.UnaryServerInterceptor {
	o := newAdmission(lb, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(o.keep(ctx), req)
	}
}

// StreamServerInterceptor keeps the propagated keys of each incoming
// stream on its context.
func StreamServerInterceptor(lb *graylb.LoadBalancer, opts ...Option) grpc.StreamServerInterceptor {
	o := newAdmission(lb, opts)
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

// outgoing prepares a call's context: the request's routing state
// written on its outgoing metadata (adapter.Balancer.Stamp), so that the
// picker reads the decision made here and every later hop routes the same
// way. The pairs go on at once (each append costs a context and three
// allocations); a decision alone, on a call without outgoing metadata of
// its own (a handler's context, a rule that decided), gets the decision's
// metadata, made once per kind and lane (see decidedCtx; one allocation).
// A nil lb passes the admitted keys on.
func outgoing(ctx context.Context, lb *adapter.Balancer, d *decisions) context.Context {
	m := mdOuts.Get().(*mdOut)
	m.ctx, m.d, m.kv = ctx, d, m.buf[:0]
	lb.Stamp(ctx, m, nil)
	ctx = m.apply()
	clear(m.buf[:])
	*m = mdOut{del: m.del[:0]}
	mdOuts.Put(m)
	return ctx
}

// NextHop returns a function that writes the routing state of the
// request a context serves on the context's outgoing metadata, as the
// client interceptors write it on every call (adapter.Balancer.Stamp): for
// a gRPC client made without graylb's options, whose calls the
// interceptors do not see, to carry the request's keys and kind on. A nil
// lb writes the admitted keys alone.
func NextHop(lb *graylb.LoadBalancer) func(ctx context.Context) context.Context {
	var ab *adapter.Balancer
	keys := graylb.DefaultKeys()
	if lb != nil {
		ab, keys = adapter.For(lb), lb.Keys()
	}
	d := newDecisions(keys.Gray, keys.Version)
	return func(ctx context.Context) context.Context { return outgoing(ctx, ab, d) }
}

// UnaryClientInterceptor passes the kept incoming keys on to the call and
// writes the kind lb's rules decided (see DialOptions); it mirrors the
// idempotent methods (Idempotent) to the gray build and refuses a shadow
// copy's calls of the others.
func UnaryClientInterceptor(lb *graylb.LoadBalancer, opts ...ClientOption) grpc.UnaryClientInterceptor {
	keys := lb.Keys()
	d := newDecisions(keys.Gray, keys.Version)
	ab := adapter.For(lb)
	co := newClientOptions(lb, opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		out := outgoing(ctx, ab, d)
		idem := idempotent(method, opts)
		if !idem && shadow.Refuses(out) {
			return co.refuse(cc, method)
		}
		if idem && co.mirror.Drawn() && !isGray(out, d) && !shadow.Is(ctx) {
			return co.mirrored(ctx, out, ab, d, method, req, reply, cc, invoker, opts)
		}
		return invoker(out, method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams (which it
// does not mirror).
func StreamClientInterceptor(lb *graylb.LoadBalancer, opts ...ClientOption) grpc.StreamClientInterceptor {
	keys := lb.Keys()
	d := newDecisions(keys.Gray, keys.Version)
	ab := adapter.For(lb)
	co := newClientOptions(lb, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		out := outgoing(ctx, ab, d)
		if !idempotent(method, opts) && shadow.Refuses(out) {
			return nil, co.refuse(cc, method)
		}
		return streamer(out, desc, cc, method, opts...)
	}
}

// CanCarry reports whether gRPC metadata carries key (in lower case) with
// value as they are: a key grpc-go sends ([0-9a-z-_.], not reserved
// grpc-, not binary -bin) and a value of printable ASCII. A routing key an
// HTTP server side admitted (HTTP allows more) is written on a gRPC call
// only when it can be carried: the call would fail for it.
func CanCarry(key, value string) bool { return metadataKey(key) && metadataValue(value) }

// metadataKey reports whether k (lower case) is a metadata key grpc-go
// sends.
func metadataKey(k string) bool {
	if k == "" || strings.HasPrefix(k, "grpc-") || strings.HasSuffix(k, "-bin") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// metadataValue reports whether v is a metadata value grpc-go sends:
// printable ASCII.
func metadataValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
