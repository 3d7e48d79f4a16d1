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
	lb      *adapter.Balancer
	names   []string // propagated: lb's keys, then the extra ones (match keys aside)
	trusted func(*http.Request) bool
	user    func(*http.Request) string
	userKey string
}

// WithPropagated adds header names propagated beside the LoadBalancer's
// keys (for example a header your own filters read). They count as routing
// keys at the trust boundary too.
func WithPropagated(names ...string) MiddlewareOption {
	return func(m *middleware) {
		for _, n := range names {
			if n != "" && !containsFold(m.names, n) {
				m.names = append(m.names, n)
			}
		}
	}
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

// Middleware returns server middleware that keeps the incoming values of
// lb's keys (gray, user, version; see graylb.LoadBalancer.Keys) and of the
// keys its match rules name (adapter.Balancer.MatchKeys, read per
// request, so a rules change needs no new middleware) on the request
// context, so every call made with that context through the Transport
// passes them on. A nil lb has the default key names.
func Middleware(lb *graylb.LoadBalancer, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	keys := lb.Keys()
	keys.Match = nil // read per request
	m := &middleware{lb: adapter.For(lb), userKey: keys.User}
	WithPropagated(keys.Names()...)(m)
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m.trusted != nil && !m.trusted(r) {
				r = m.strip(r)
				r = r.WithContext(graylb.WithUntrustedCaller(r.Context()))
			}
			if m.user != nil {
				r = m.setUser(r, m.user(r))
			}
			var kept http.Header
			keep := func(name, value string) {
				if kept == nil {
					kept = make(http.Header, len(m.names))
				}
				kept[canonical(name)] = []string{value}
			}
			for _, n := range m.names {
				if v := r.Header.Get(n); v != "" {
					keep(n, v)
				}
			}
			// (With WithUser, the user key now holds the program's value.)
			for _, n := range m.lb.MatchKeys() {
				if v := r.Header.Get(n); v != "" && !containsFold(m.names, n) {
					keep(n, v)
				}
			}
			if kept != nil {
				r = r.WithContext(context.WithValue(r.Context(), incomingKey{}, kept))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// setUser returns a copy of r whose user header is u alone (none when u is
// empty), whatever the caller sent under that name in any letter case, so
// a handler that copies the incoming headers (a reverse proxy) passes the
// program's user id on, not the caller's.
func (m *middleware) setUser(r *http.Request, u string) *http.Request {
	r = r.Clone(r.Context())
	for k := range r.Header {
		if strings.EqualFold(k, m.userKey) {
			delete(r.Header, k)
		}
	}
	if u != "" {
		r.Header.Set(m.userKey, u)
	}
	return r
}

// strip returns a copy of r without any routing header, in any letter case.
func (m *middleware) strip(r *http.Request) *http.Request {
	r = r.Clone(r.Context())
	match := m.lb.MatchKeys()
	for k := range r.Header {
		if containsFold(m.names, k) || containsFold(match, k) {
			delete(r.Header, k)
		}
	}
	return r
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
