// Package httpctx adapts graylb to net/http: a ContextHandler that reads the
// gray, user and version headers of the call being made, server middleware
// that keeps the incoming ones on the request context (full-link
// propagation), and a RoundTripper that resolves http://<service>/... through
// a graylb.LoadBalancer.
//
// Wire it up once per service:
//
//	lb, _ := graylb.New(supplier, graylb.WithContextHandler(httpctx.Handler()))
//	client := &http.Client{Transport: httpctx.NewTransport(lb)}
//	http.ListenAndServe(addr, httpctx.Middleware()(mux))
//
// and pass each handler's r.Context() to the requests it makes
// (http.NewRequestWithContext): the headers travel on it.
package httpctx

import (
	"context"
	"net/http"
	"net/textproto"

	"github.com/graylb/graylb"
)

// DefaultHeaders are the headers propagated from an incoming request to the
// calls made while serving it.
var defaultHeaders = []string{graylb.DefaultGrayHeader, graylb.DefaultUserHeader, graylb.DefaultVersionKey}

// DefaultHeaders returns the names propagated by default: gray, uid, version.
func DefaultHeaders() []string { return append([]string(nil), defaultHeaders...) }

type (
	outgoingKey struct{} // the outgoing request's header, set by the Transport
	incomingKey struct{} // the propagated incoming headers, set by Middleware
)

// Handler returns the ContextHandler over HTTP headers: for the call being
// made, the outgoing request's header first (as seen by the Transport),
// then the incoming request's (kept on the context by Middleware).
func Handler() graylb.ContextHandler { return handler{} }

type handler struct{}

func (handler) Value(ctx context.Context, name string) string {
	if h, _ := ctx.Value(outgoingKey{}).(http.Header); h != nil {
		if v := get(h, name); v != "" {
			return v
		}
	}
	if h, _ := ctx.Value(incomingKey{}).(http.Header); h != nil {
		return get(h, name)
	}
	return ""
}

// get is Header.Get without allocating for the usual names.
func get(h http.Header, name string) string {
	if v := h[canonical(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// canonical avoids textproto's allocation for the default names.
func canonical(name string) string {
	switch name {
	case "gray":
		return "Gray"
	case "uid":
		return "Uid"
	case "version":
		return "Version"
	case "gray-tag":
		return "Gray-Tag"
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// WithOutgoing returns ctx carrying h as the outgoing request's header, so
// the Handler sees it. The Transport does this itself; use it to Pick by
// hand for a request you are about to send.
func WithOutgoing(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, outgoingKey{}, h)
}

// Incoming returns the propagated incoming headers on ctx (nil if none).
func Incoming(ctx context.Context) http.Header {
	h, _ := ctx.Value(incomingKey{}).(http.Header)
	return h
}

// MiddlewareOption configures Middleware.
type MiddlewareOption func(*middleware)

type middleware struct {
	names   []string
	trusted func(*http.Request) bool
	drop    []string
}

// WithHeaders sets the header names propagated (default gray, uid,
// version).
func WithHeaders(names ...string) MiddlewareOption {
	return func(m *middleware) { m.names = append([]string(nil), names...) }
}

// WithTrusted marks a trust boundary, such as a public gateway: for a
// request the predicate calls untrusted, the client-supplied headers named
// in drop (default gray and version) are removed from the request and not
// propagated. A nil predicate trusts every request.
func WithTrusted(pred func(*http.Request) bool, drop ...string) MiddlewareOption {
	return func(m *middleware) {
		m.trusted = pred
		if len(drop) > 0 {
			m.drop = append([]string(nil), drop...)
		}
	}
}

// Middleware returns server middleware that keeps the incoming propagated
// headers on the request context, so every outgoing call made with that
// context through the Transport passes them on.
func Middleware(opts ...MiddlewareOption) func(http.Handler) http.Handler {
	m := &middleware{names: DefaultHeaders(), drop: []string{graylb.DefaultGrayHeader, graylb.DefaultVersionKey}}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m.trusted != nil && !m.trusted(r) {
				r = r.Clone(r.Context())
				for _, n := range m.drop {
					r.Header.Del(n)
				}
			}
			var kept http.Header
			for _, n := range m.names {
				if v := r.Header.Get(n); v != "" {
					if kept == nil {
						kept = make(http.Header, len(m.names))
					}
					kept[canonical(n)] = []string{v}
				}
			}
			if kept != nil {
				r = r.WithContext(context.WithValue(r.Context(), incomingKey{}, kept))
			}
			next.ServeHTTP(w, r)
		})
	}
}
