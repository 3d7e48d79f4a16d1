package graylbkratos

import (
	"context"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"

	kmetadata "github.com/go-kratos/kratos/v2/metadata"
	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/transport"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	grpcmd "google.golang.org/grpc/metadata"
)

// Option configures the server middleware.
type Option func(*options)

type options struct {
	ab      *balancer
	names   []string // propagated: lb's keys, then the extra ones (match keys aside)
	userKey string
	trusted func(context.Context) bool
	user    func(context.Context) string
}

// WithPropagated adds header names propagated beside the LoadBalancer's
// keys (a header your own filters read). They count as routing keys at the
// trust boundary too.
func WithPropagated(names ...string) Option {
	return func(o *options) {
		for _, n := range names {
			if n != "" && !containsFold(o.names, n) {
				o.names = append(o.names, n)
			}
		}
	}
}

// WithTrusted marks a trust boundary (an edge server facing the public):
// for a request for which pred returns false, no routing key the caller
// sent (the LoadBalancer's gray, user and version keys, the keys its match
// rules in force name, and WithPropagated keys, in any letter case) is
// kept or propagated, and they are removed from the request's header (and,
// over gRPC, its incoming metadata; and from the server metadata of Kratos'
// metadata middleware when it ran first) before the handler sees it, and
// the members of the request's W3C baggage they name are removed from its
// baggage header. OpenTelemetry's baggage propagation (Kratos' tracing
// middleware) takes that header onto the context as it runs, which Server
// cannot undo: at an edge, list Server before the tracing middleware. The
// request then counts as a caller outside the boundary: every call made
// with its context settles its kind (it writes prod as "false" too), so
// no later hop's rules can be steered by what the caller sent. pred sees
// the request's context (transport.FromServerContext, the HTTP request
// through http.RequestFromServerContext, the gRPC peer through
// peer.FromContext). A nil pred trusts every request, the default for
// internal services.
func WithTrusted(pred func(ctx context.Context) bool) Option {
	return func(o *options) { o.trusted = pred }
}

// WithUser sets where the user id comes from: fn returns the authenticated
// user of the request ("" for none). Its value is the request's user id
// for routing (gray users, the sticky canary) and is propagated under the
// LoadBalancer's user key; the caller's own value under that key, trusted
// or not, is replaced by it in the request's header too (removed when fn
// returns ""). fn runs when Server does: list Server after the middleware
// that authenticates the request.
func WithUser(fn func(ctx context.Context) string) Option {
	return func(o *options) { o.user = fn }
}

func newOptions(lb *graylb.LoadBalancer, opts []Option) *options {
	keys := lb.Keys()
	keys.Match = nil // read per request: rules change at run time
	o := &options{ab: balancerOf(lb), userKey: keys.User}
	WithPropagated(keys.Names()...)(o)
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// Server returns the Kratos server middleware every service that calls
// others adds (kratos/transport/http.Middleware, grpc.Middleware): it keeps
// the request's values of the LoadBalancer's keys (gray, user, version),
// of the keys its match rules name and of WithPropagated keys on the
// request's context, where the client middleware (Client) and the
// Selector read them, so the calls the handler makes with its context
// route as the request does and carry its keys on. With WithTrusted it is
// the trust boundary of an edge server. A nil lb has the default key
// names.
//
// Kratos runs server middleware on a gRPC server's unary methods and on
// the HTTP routes that run ctx.Middleware (the handlers protoc-gen-go-http
// generates do).
func Server(lb *graylb.LoadBalancer, opts ...Option) middleware.Middleware {
	o := newOptions(lb, opts)
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, req interface{}) (interface{}, error) {
			return next(o.keep(ctx), req)
		}
	}
}

// keep returns ctx with the request's routing values kept; at a trust
// boundary, for an untrusted request, it removes them instead.
func (o *options) keep(ctx context.Context) context.Context {
	tr, ok := transport.FromServerContext(ctx)
	if !ok {
		return ctx
	}
	hdr := tr.RequestHeader()
	match := matchKeys(o.ab)
	if o.trusted != nil && !o.trusted(ctx) {
		drop := func(k string) bool { return containsFold(o.names, k) || containsFold(match, k) }
		ctx = o.remove(ctx, hdr, drop)
		ctx = o.stripBaggage(ctx, hdr, drop)
		ctx = untrusted(ctx)
	}
	if o.user != nil {
		u := o.user(ctx)
		ctx = o.remove(ctx, hdr, func(k string) bool { return strings.EqualFold(k, o.userKey) })
		if u != "" {
			hdr.Set(o.userKey, u)
			if md, ok := grpcmd.FromIncomingContext(ctx); ok {
				md.Set(o.userKey, u)
				ctx = grpcmd.NewIncomingContext(ctx, md)
			}
		}
	}
	var k kept
	for _, n := range o.names {
		if v := hdr.Get(n); v != "" {
			k = append(k, n, v)
		}
	}
	for _, n := range match {
		if v := hdr.Get(n); v != "" && !containsFold(o.names, n) {
			k = append(k, n, v)
		}
	}
	if k == nil {
		return ctx
	}
	return context.WithValue(ctx, keptKey{}, k)
}

// remove deletes the keys drop names from the request's header, in every
// letter case, from a gRPC request's incoming metadata, and from the
// server metadata Kratos' metadata middleware copied from the header when
// it ran first (its client side writes x-md-global- keys on every
// outgoing call).
func (o *options) remove(ctx context.Context, hdr transport.Header, drop func(string) bool) context.Context {
	// Kratos' header carriers are maps (http.Header, metadata.MD) and the
	// transport.Header interface has no Del: delete through the map.
	if m := reflect.ValueOf(hdr); m.Kind() == reflect.Map && m.Type().Key().Kind() == reflect.String {
		for _, k := range m.MapKeys() {
			if drop(k.String()) {
				m.SetMapIndex(k, reflect.Value{})
			}
		}
	} else {
		for _, k := range hdr.Keys() {
			if drop(k) {
				hdr.Set(k, "")
			}
		}
	}
	if md, ok := grpcmd.FromIncomingContext(ctx); ok {
		clean := grpcmd.MD{}
		for k, v := range md {
			if !drop(k) {
				clean[k] = v
			}
		}
		ctx = grpcmd.NewIncomingContext(ctx, clean)
	}
	if md, ok := kmetadata.FromServerContext(ctx); ok {
		clean := kmetadata.New()
		for k, v := range md {
			if !drop(k) {
				clean[k] = v
			}
		}
		ctx = kmetadata.NewServerContext(ctx, clean)
	}
	return ctx
}

// baggageKey is the W3C baggage header, which OpenTelemetry's propagation
// (Kratos' tracing middleware) takes onto the context and writes on every
// outgoing call.
const baggageKey = "baggage"

// stripBaggage removes from the request's baggage (header and gRPC
// incoming metadata) the list members whose key drop names, in any letter
// case; other members, their properties included, stay as they were.
func (o *options) stripBaggage(ctx context.Context, hdr transport.Header, drop func(string) bool) context.Context {
	vals := hdr.Values(baggageKey)
	if len(vals) == 0 {
		return ctx
	}
	var keep []string
	for _, v := range vals {
		for _, m := range strings.Split(v, ",") {
			key := m
			if i := strings.IndexAny(m, "=;"); i >= 0 {
				key = m[:i]
			}
			if m = strings.TrimSpace(m); m != "" && !drop(strings.TrimSpace(key)) {
				keep = append(keep, m)
			}
		}
	}
	ctx = o.remove(ctx, hdr, func(k string) bool { return strings.EqualFold(k, baggageKey) })
	if len(keep) == 0 {
		return ctx
	}
	clean := strings.Join(keep, ",")
	hdr.Set(baggageKey, clean)
	if md, ok := grpcmd.FromIncomingContext(ctx); ok {
		md.Set(baggageKey, clean)
		ctx = grpcmd.NewIncomingContext(ctx, md)
	}
	return ctx
}

// Client returns the Kratos client middleware every client adds
// (kratos/transport/http.WithMiddleware, grpc.WithMiddleware): it writes
// on the outgoing call's header the values the server middleware kept
// that the call does not carry, and, when lb's rules (a gray user, a match
// rule, the canary), a context value (graylb.WithValue) or the caller's
// own flag decided the call's kind, the kind under the gray key ("true" or
// "false") and a lane a match rule gave it under the version key. The
// Selector then reads that key, so the decision is made once per call and
// every later hop — Kratos, httpctx or grpcctx — routes the same way. A
// nil lb only passes the kept values on.
func Client(lb *graylb.LoadBalancer) middleware.Middleware {
	b := balancerOf(lb)
	grayCanon := textproto.CanonicalMIMEHeaderKey(lb.Keys().Gray)
	h := newHandler(lb.Keys())
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, req interface{}) (interface{}, error) {
			if tr, ok := transport.FromClientContext(ctx); ok {
				hdr := tr.RequestHeader()
				for i, k := 0, keptFrom(ctx); i+1 < len(k); i += 2 {
					if hdr.Get(k[i]) == "" {
						hdr.Set(k[i], k[i+1])
					}
				}
				var p pass
				if b != nil {
					p = passFor(ctx, b, h)
				}
				if p.GrayKey != "" {
					if r := httpRequest(tr); r != nil {
						r.Header[grayCanon] = []string{p.Gray} // Set without canonicalising per call
					} else {
						hdr.Set(p.GrayKey, p.Gray)
					}
				}
				if p.VersionKey != "" {
					hdr.Set(p.VersionKey, p.Version)
				}
			}
			return next(ctx, req)
		}
	}
}

// httpRequest is the request of a Kratos HTTP client call (nil for
// another transport).
func httpRequest(tr transport.Transporter) *http.Request {
	if ht, ok := tr.(*khttp.Transport); ok {
		return ht.Request()
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
