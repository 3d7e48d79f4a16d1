package graylbkratos

import (
	"context"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"sync"

	kmetadata "github.com/go-kratos/kratos/v2/metadata"
	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/go-kratos/kratos/v2/transport"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/shadow"
	grpcmd "google.golang.org/grpc/metadata"
)

// Option configures the server middleware.
type Option func(*options)

type options struct {
	extra   []string // WithPropagated names
	trusted func(context.Context) bool
	user    func(context.Context) string
}

// WithPropagated adds header names propagated beside the LoadBalancer's
// keys (a header your own filters read). They count as routing keys at the
// trust boundary too.
func WithPropagated(names ...string) Option {
	return func(o *options) { o.extra = append(o.extra, names...) }
}

// WithTrusted marks a trust boundary (an edge server facing the public):
// for a request for which pred returns false, no routing key the caller
// sent (the LoadBalancer's gray, user and version keys, the keys its match
// rules in force name, and WithPropagated keys, in any letter case) is
// kept or propagated, and they are removed from the request's header (and,
// over gRPC, its incoming metadata; and from the server metadata of Kratos'
// metadata middleware when it ran first) before the handler sees it; with
// otelgraylb.WithBaggage, the members of its W3C baggage they name go from its
// baggage header and from the context's baggage too. The
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

// Server returns the Kratos server middleware every service that calls
// others adds (kratos/transport/http.Middleware, grpc.Middleware): it
// admits each request (adapter.Admitter), keeping the request's values of
// the LoadBalancer's keys (gray, user, version), of the keys its match
// rules name and of WithPropagated keys on the request's context as its
// routing state, which every client reads — this package's Client and
// Selector, httpctx's Transport, grpcctx's interceptors and picker,
// go-zero's clients — so the calls the handler makes with its context
// route as the request does and carry its keys on, over any transport.
// With WithTrusted it is the trust boundary of an edge server. A nil lb
// has the default key names.
//
// Kratos runs server middleware on a gRPC server's unary methods and on
// the HTTP routes that run ctx.Middleware (the handlers protoc-gen-go-http
// generates do).
func Server(lb *graylb.LoadBalancer, opts ...Option) middleware.Middleware {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	adm := balancerOf(lb).Admitter(o.extra...)
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, req interface{}) (interface{}, error) {
			return next(o.keep(ctx, adm), req)
		}
	}
}

// keep admits the request served with ctx; at a trust boundary, for an
// untrusted request, it removes its routing keys instead.
func (o *options) keep(ctx context.Context, adm *admitter) context.Context {
	tr, ok := transport.FromServerContext(ctx)
	if !ok {
		return ctx
	}
	c := &headerCarrier{ctx: ctx, hdr: tr.RequestHeader()}
	var how admission
	if o.trusted != nil && !o.trusted(ctx) {
		how.Untrusted = true
	}
	how.User = o.user
	ctx = adm.Admit(ctx, c, how)
	return c.apply(ctx)
}

// headerCarrier is a Kratos server request's keys as an adapter.Carrier:
// its transport header, and where Kratos and grpc-go keep copies of it —
// a gRPC request's incoming metadata and the server metadata of Kratos'
// metadata middleware (when it ran first; its client side writes x-md-
// keys on every outgoing call). The copies are copied before their first
// change and put on the context by apply.
type headerCarrier struct {
	ctx              context.Context
	hdr              transport.Header
	grpc             grpcmd.MD
	kratos           kmetadata.Metadata
	ownGRPC, ownKrat bool
}

func (c *headerCarrier) Get(name string) string { return c.hdr.Get(name) }

func (c *headerCarrier) Set(name, value string) {
	c.Delete(name)
	c.hdr.Set(name, value)
	if c.ownGRPC || c.loadGRPC() {
		c.grpc.Set(name, value)
	}
}

func (c *headerCarrier) Delete(name string) {
	drop := func(k string) bool { return strings.EqualFold(k, name) }
	removeFromHeader(c.hdr, drop)
	if md, ok := grpcmd.FromIncomingContext(c.ctx); (ok && carries(md, drop)) || (c.ownGRPC && carries(c.grpc, drop)) {
		if c.ownGRPC || c.loadGRPC() {
			for k := range c.grpc {
				if drop(k) {
					delete(c.grpc, k)
				}
			}
		}
	}
	if md, ok := kmetadata.FromServerContext(c.ctx); (ok && carries(md, drop)) || (c.ownKrat && carries(c.kratos, drop)) {
		if c.ownKrat || c.loadKratos() {
			for k := range c.kratos {
				if drop(k) {
					delete(c.kratos, k)
				}
			}
		}
	}
}

// carries reports whether m has a key drop names.
func carries[V any](m map[string]V, drop func(string) bool) bool {
	for k := range m {
		if drop(k) {
			return true
		}
	}
	return false
}

// Context returns ctx carrying the changed copies (as apply, without
// keeping ctx).
func (c *headerCarrier) Context(ctx context.Context) context.Context {
	if c.ownGRPC {
		ctx = grpcmd.NewIncomingContext(ctx, c.grpc)
	}
	if c.ownKrat {
		ctx = kmetadata.NewServerContext(ctx, c.kratos)
	}
	return ctx
}

// loadGRPC copies the request's incoming gRPC metadata, false when it has
// none.
func (c *headerCarrier) loadGRPC() bool {
	md, ok := grpcmd.FromIncomingContext(c.ctx)
	if !ok {
		return false
	}
	c.grpc, c.ownGRPC = md.Copy(), true
	return true
}

// loadKratos copies the request's Kratos server metadata, false when it
// has none.
func (c *headerCarrier) loadKratos() bool {
	md, ok := kmetadata.FromServerContext(c.ctx)
	if !ok {
		return false
	}
	c.kratos, c.ownKrat = md.Clone(), true
	return true
}

// apply returns ctx carrying the changed copies and keeps it.
func (c *headerCarrier) apply(ctx context.Context) context.Context {
	c.ctx = c.Context(ctx)
	return c.ctx
}

// removeFromHeader deletes the keys drop names from hdr, in every letter
// case. Kratos' header carriers are maps (http.Header, metadata.MD) and the
// transport.Header interface has no Del: delete through the map.
func removeFromHeader(hdr transport.Header, drop func(string) bool) {
	if m := reflect.ValueOf(hdr); m.Kind() == reflect.Map && m.Type().Key().Kind() == reflect.String {
		for _, k := range m.MapKeys() {
			if drop(k.String()) {
				m.SetMapIndex(k, reflect.Value{})
			}
		}
		return
	}
	for _, k := range hdr.Keys() {
		if drop(k) {
			hdr.Set(k, "")
		}
	}
}

// Client returns the Kratos client middleware every client adds
// (kratos/transport/http.WithMiddleware, grpc.WithMiddleware): it writes
// on the outgoing call's header the routing keys admitted for the request
// being served (by Server, or any other adapter's server side) that the
// call does not carry, and, when lb's rules (a gray user, a match
// rule, the canary), a context value (graylb.WithValue) or the caller's
// own flag decided the call's kind, the kind under the gray key ("true" or
// "false") and a lane a match rule gave it under the version key. The
// Selector then reads that key, so the decision is made once per call and
// every later hop — Kratos, httpctx or grpcctx — routes the same way. A
// nil lb only passes the kept values on.
//
// An HTTP call (Invoke) ends for the node's Stats and the CallObserver
// when Kratos' client has read and decoded its body, not when its headers
// came: a body that fails, does not decode or outlives the caller's
// deadline counts against the node, and the call's duration runs to its
// end. (Kratos' Client.Do hands the body to its caller: its calls end at
// their headers.)
func Client(lb *graylb.LoadBalancer, opts ...ClientOption) middleware.Middleware {
	b := balancerOf(lb)
	keys := lb.Keys()
	grayKey, grayCanon := keys.Gray, textproto.CanonicalMIMEHeaderKey(keys.Gray)
	idempotent := map[string]bool{}
	for _, o := range opts {
		if o != nil {
			o(idempotent)
		}
	}
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, req interface{}) (interface{}, error) {
			if tr, ok := transport.FromClientContext(ctx); ok {
				if r := httpRequest(tr); !(r != nil && shadow.Safe(r.Method) || r == nil && idempotent[tr.Operation()]) && shadow.Refuses(ctx) {
					call := tr.Operation()
					if r != nil {
						call = r.Method + " " + r.URL.Path
					}
					shadow.Refused(lb, tr.Endpoint(), call)
					return nil, &shadow.WriteError{Service: tr.Endpoint(), Call: call}
				}
				c := clientHeaders.Get().(*clientHeader)
				c.hdr, c.req, c.grayKey, c.grayCanon = tr.RequestHeader(), httpRequest(tr), grayKey, grayCanon
				stamp(ctx, b, c)
				isHTTP := c.req != nil
				*c = clientHeader{}
				clientHeaders.Put(c)
				if isHTTP {
					return awaitBody(ctx, req, next)
				}
			}
			return next(ctx, req)
		}
	}
}

// ClientOption configures Client.
type ClientOption func(idempotent map[string]bool)

// WithIdempotent names the gRPC operations ("/pkg.Service/Method") that
// write nothing: a shadow copy (package shadow) may call them. A shadow
// copy's HTTP call other than GET, HEAD, OPTIONS or TRACE, and its call of
// any other gRPC operation, fails with an error wrapping shadow.ErrWrite
// unless shadow.AllowWrites.
func WithIdempotent(operations ...string) ClientOption {
	return func(m map[string]bool) {
		for _, op := range operations {
			m[op] = true
		}
	}
}

// clientHeader is a Kratos client call's header as the Carrier Stamp
// writes (pooled: a call's Stamp allocates no carrier). The gray key of an
// HTTP call is set without canonicalising its name per call.
type clientHeader struct {
	hdr                transport.Header
	req                *http.Request // the HTTP call's, nil over gRPC
	grayKey, grayCanon string
}

var clientHeaders = sync.Pool{New: func() any { return new(clientHeader) }}

func (c *clientHeader) Get(name string) string                      { return c.hdr.Get(name) }
func (c *clientHeader) Value(_ context.Context, name string) string { return c.hdr.Get(name) }

func (c *clientHeader) Set(name, value string) {
	if c.req != nil && name == c.grayKey {
		c.req.Header[c.grayCanon] = []string{value}
		return
	}
	c.hdr.Set(name, value)
}

func (c *clientHeader) Delete(name string) {
	removeFromHeader(c.hdr, func(k string) bool { return strings.EqualFold(k, name) })
}

// awaitBody makes the HTTP call of ctx with next and ends it once next
// returns, its body read and decoded, rather than when Kratos' client
// calls the Select's done at the response's headers (see callDone): a
// body that stalls or breaks off counts against the node, and the call's
// duration runs to its end. Without a selector.Peer (Kratos' Client.Do,
// which hands the body to its caller) the call ends at its headers.
func awaitBody(ctx context.Context, req interface{}, next middleware.Handler) (interface{}, error) {
	p, ok := selector.FromPeerContext(ctx)
	if !ok || p.Node != nil {
		return next(ctx, req)
	}
	p.Node = awaitingBody{}
	reply, err := next(ctx, req)
	switch n := p.Node.(type) {
	case *callDone:
		p.Node = n.node
		n.bodyRead(ctx, err)
	case awaitingBody: // no call was tracked
		p.Node = nil
	}
	return reply, err
}

// httpRequest is the request of a Kratos HTTP client call (nil for
// another transport).
func httpRequest(tr transport.Transporter) *http.Request {
	if ht, ok := tr.(*khttp.Transport); ok {
		return ht.Request()
	}
	return nil
}
