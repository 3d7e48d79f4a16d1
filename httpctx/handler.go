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
	"github.com/graylb/graylb/adapter"
)

// outgoingKey carries the outgoing request's header (WithOutgoing).
type outgoingKey struct{}

// Handler returns the ContextHandler over HTTP headers: for the call being
// made, the outgoing request's header first (as seen by the Transport, or
// set with WithOutgoing), then the keys a server side admitted for the
// request being served (Middleware, or any other adapter's server side:
// the request's routing state is the same whatever transport it came
// over). A request no server side admitted contributes nothing: the trust
// boundary is the server side's to enforce.
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
	return adapter.KeptFrom(ctx).Get(name)
}

// get is Header.Get without allocating for the usual names.
func get(h http.Header, name string) string {
	if v := h[canonical(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// canonicalKeys reports whether every key of h is in canonical form, as
// net/http stores the headers it reads and Header.Set writes; a program
// can store others (h["gray"]), which net/http sends as they are and the
// next hop reads in canonical form.
func canonicalKeys(h http.Header) bool {
	for k := range h {
		upper := true
		for i := 0; i < len(k); i++ {
			c := k[i]
			if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
				return false
			}
			upper = c == '-'
		}
	}
	return true
}

// canonicalized returns h with every key in canonical form (the values of
// two spellings of one name joined, as the next hop reads them): what the
// Transport routes by when a program stored a key in another form.
func canonicalized(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		out[ck] = append(out[ck], v...)
	}
	return out
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

// Incoming returns the routing keys admitted for the request served with
// ctx (by Middleware or any other adapter's server side) as a new header,
// nil when there are none.
func Incoming(ctx context.Context) http.Header {
	kept := adapter.KeptFrom(ctx)
	if kept.Len() == 0 {
		return nil
	}
	h := make(http.Header, kept.Len())
	for i := 0; i < kept.Len(); i++ {
		name, value := kept.At(i)
		h[canonical(name)] = []string{value}
	}
	return h
}

// headerReader is the Transport's reader of a call's keys: the outgoing
// request's header h, then the keys admitted for the request being served
// (as Handler reads them, without a context carrying h).
// A struct of one map, it is stored in an interface without allocating.
type headerReader struct{ h http.Header }

func (r headerReader) Value(ctx context.Context, name string) string {
	if v := get(r.h, name); v != "" {
		return v
	}
	return adapter.KeptFrom(ctx).Get(name)
}
