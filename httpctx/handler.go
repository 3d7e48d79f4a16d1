// Package httpctx adapts graylb to net/http: a ContextHandler that reads the
// gray, user and version headers of the call being made, server middleware
// that keeps the incoming ones on the request context (full-link
// propagation) and enforces a trust boundary, and a RoundTripper that
// resolves http://<service>/... through a graylb.LoadBalancer.
//
// Wire it up once per service; every piece takes the key names from lb
// and reads the HTTP headers itself:
//
//	lb, _ := graylb.New(supplier)
//	client := &http.Client{Transport: httpctx.NewTransport(lb)}
//	http.ListenAndServe(addr, httpctx.Middleware(lb)(mux))
//
// and pass each handler's r.Context() to the requests it makes
// (http.NewRequestWithContext): the headers travel on it.
//
// An instance that stops abruptly while the registry still lists it (kill
// -9: its connections reset, new ones refused) serves nobody. The
// Transport sends an idempotent request (GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE, or one with an Idempotency-Key) that met it again to an instance
// not tried yet: a gray request to another gray instance, else to prod (the
// gray rule's fall-back), a prod request only to prod. A request that is
// not idempotent fails at once with a *ConnectionError (errors.Is
// ErrConnectionFailed) that names the instance and says why it was not
// sent again. See Transport for the whole policy and WithRetryUnsent,
// WithMaxRetries to change it.
package httpctx

import (
	"context"
	"net/http"
	"net/textproto"

	"github.com/graylb/graylb"
)

type (
	outgoingKey struct{} // the outgoing request's header, set by the Transport
	incomingKey struct{} // the propagated incoming headers, set by Middleware
)

// Handler returns the ContextHandler over HTTP headers: for the call being
// made, the outgoing request's header first (as seen by the Transport, or
// set with WithOutgoing), then the incoming request's as Middleware kept
// it. A request that did not pass through Middleware contributes nothing:
// the trust boundary is Middleware's to enforce.
//
// The Transport reads these headers itself; register Handler
// (graylb.WithContextHandler) for picks the program makes by hand with a
// handler's context (lb.Pick(r.Context(), ...)). Registered or not, the
// Transport asks it once.
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

// headerReader is the Transport's reader of a call's keys: the outgoing
// request's header h, then the incoming request's headers Middleware kept
// on the context (as Handler reads them, without a context carrying h).
// A struct of one map, it is stored in an interface without allocating.
type headerReader struct{ h http.Header }

func (r headerReader) Value(ctx context.Context, name string) string {
	if v := get(r.h, name); v != "" {
		return v
	}
	if h, _ := ctx.Value(incomingKey{}).(http.Header); h != nil {
		return get(h, name)
	}
	return ""
}
