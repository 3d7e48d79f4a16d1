package httpctx

import (
	"context"
	"net/http"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// MiddlewareOption configures Middleware.
type MiddlewareOption func(*middleware)

type middleware struct {
	extra   []string // WithPropagated names
	trusted func(*http.Request) bool
	user    func(*http.Request) string
}

// WithPropagated adds header names propagated beside the LoadBalancer's
// keys (for example a header your own filters read). They count as routing
// keys at the trust boundary too.
func WithPropagated(names ...string) MiddlewareOption {
	return func(m *middleware) { m.extra = append(m.extra, names...) }
}

// WithTrusted marks a trust boundary, such as a public gateway. A request
// for which pred returns false is untrusted: every header the LoadBalancer
// reads (its gray, user and version keys, whatever they are named, and
// the keys the match rules in force name) and every WithPropagated header
// is removed from the request, in any letter
// case and however often repeated, before the next handler sees it, and
// nothing of it is propagated. A nil pred trusts every request (internal
// traffic, the default).
func WithTrusted(pred func(*http.Request) bool) MiddlewareOption {
	return func(m *middleware) { m.trusted = pred }
}

// WithUser sets where the user id comes from: fn returns the authenticated
// user of the request ("" for none), as the program knows it (a verified
// token, a session). Its value is the request's user id for routing and is
// propagated under the LoadBalancer's user key. With WithUser the user id
// comes from fn alone: the request's user header, trusted or not, is
// replaced by fn's value (removed when it is ""), so a handler that copies
// the incoming headers passes fn's value on too. At a trust boundary this
// is how gray-user rules and a sticky canary get a user id an attacker
// cannot choose.
func WithUser(fn func(*http.Request) string) MiddlewareOption {
	return func(m *middleware) { m.user = fn }
}

// Middleware returns server middleware that admits each request: it keeps
// the incoming values of lb's keys (gray, user, version; see
// graylb.LoadBalancer.Keys), of the keys its match rules name (read per
// request, so a rules change needs no new middleware) and of WithPropagated
// headers on the request context as the request's routing state
// (adapter.Admitter). Every call made with that context routes as the
// request does and passes its keys on, over any transport: this package's
// Transport, grpcctx's interceptors and picker, the Kratos and go-zero
// clients, lb.Pick. A nil lb has the default key names.
func Middleware(lb *graylb.LoadBalancer, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	m := &middleware{}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	adm := adapter.For(lb).Admitter(m.extra...)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var how adapter.Admission
			if m.trusted != nil && !m.trusted(r) {
				how.Untrusted = true
			}
			if how.Untrusted || m.user != nil {
				// The caller's request is not modified: the keys are
				// deleted from (and the user id written to) a copy.
				r = r.Clone(r.Context())
			}
			if m.user != nil {
				user, req := m.user, r
				how.User = func(ctx context.Context) string { return user(req.WithContext(ctx)) }
			}
			if ctx := adm.Admit(r.Context(), headerCarrier(r.Header), how); ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// headerCarrier is an incoming request's header as an adapter.Carrier.
type headerCarrier http.Header

func (h headerCarrier) Get(name string) string { return get(http.Header(h), name) }

func (h headerCarrier) Set(name, value string) {
	h.Delete(name)
	h[canonical(name)] = []string{value}
}

func (h headerCarrier) Delete(name string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}
