package httpctx

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/graylb/graylb/adapter"
)

// has reports whether h holds k (a canonical name), in any letter case
// when folded (h has keys not in canonical form).
func has(h http.Header, k string, folded bool) bool {
	if _, ok := h[k]; ok || !folded {
		return ok
	}
	for name := range h {
		if len(name) == len(k) && strings.EqualFold(name, k) {
			return true
		}
	}
	return false
}

// outgoing is the request sent to the instance at addr (c.r): a shallow
// copy of req (as Request.WithContext makes; a RoundTripper does not
// modify the request it sends) with its own URL holding the instance's
// address, the Host it gets and the propagated headers, in one allocation
// with the body its response will have. The header is req's own until
// something is written to it, then a clone.
//
// folded: req's header has keys not in canonical form, which the copy's
// written keys must not stand beside.
func (t *Transport) outgoing(req *http.Request, host, addr string, route adapter.Route, untrusted, folded bool) *requestCopy {
	c := &requestCopy{r: *req, u: *req.URL}
	out := &c.r
	out.URL = &c.u
	owned := false
	if untrusted {
		out.Header, owned = withoutKeys(out.Header, t.lb.MatchKeys())
	}
	out.URL.Host = addr
	switch {
	case out.Host == "":
		out.Host = host
		if t.instanceHost {
			out.Host = addr
		}
	case t.instanceHost && out.Host == host:
		out.Host = addr
	}
	t.propagate(req, out, route, untrusted, owned, folded)
	return c
}

// requestCopy is an outgoing request, its URL, and the body of its
// response (see Transport.answered, body): one allocation per try.
type requestCopy struct {
	r http.Request
	u url.URL
	b body
}

// propagate sets the incoming propagated headers the caller did not set,
// the gray header to the routed kind when it does not travel on its own,
// and the version header to the lane a match rule gave the request when it
// carries no version.
//
// owned: out.Header is a clone already; else it is cloned before the first
// write.
func (t *Transport) propagate(orig, out *http.Request, route adapter.Route, untrusted, owned, folded bool) {
	kept := adapter.KeptFrom(orig.Context())
	var spare []string // room for the values written, in the clone's one array
	own := func() {
		if !owned {
			out.Header, spare = cloneHeader(out.Header, kept.Len(), 2)
			owned = true
		}
	}
	set := func(key, v string) {
		own()
		if len(spare) == 0 {
			spare = make([]string, 2)
		}
		one := spare[:1:1]
		one[0] = v
		spare = spare[1:]
		ck := canonical(key)
		if folded {
			for k := range out.Header {
				if k != ck && len(k) == len(ck) && strings.EqualFold(k, ck) {
					delete(out.Header, k) // one spelling on the wire: the value written
				}
			}
		}
		out.Header[ck] = one
	}
	for i := 0; i < kept.Len(); i++ {
		name, _ := kept.At(i)
		if k := t.canonical(name); !has(out.Header, k, folded) {
			own()
			out.Header[k] = kept.Values(i)
		}
	}
	// A kind the call carries travels as it is (above); one that rules, a
	// context value or the caller's own flag decided is written, so every
	// later hop routes the same way. Nothing is written for a request
	// nobody classified: later hops' canary and match rules still apply.
	p := t.lb.Pass(route.Decision, untrusted)
	if p.VersionKey != "" && get(out.Header, p.VersionKey) == "" {
		set(p.VersionKey, p.Version)
	}
	if p.GrayKey != "" {
		if v := out.Header[canonical(p.GrayKey)]; len(v) != 1 || v[0] != p.Gray {
			set(p.GrayKey, p.Gray)
		}
	}
}

// cloneHeader is h.Clone with room for keys more keys and extra more
// values: the values in one array (two allocations in all, whatever the
// number of keys); spare is the room left in it (extra values).
func cloneHeader(h http.Header, keys, extra int) (out http.Header, spare []string) {
	n := 0
	for _, v := range h {
		n += len(v)
	}
	vals := make([]string, n+extra)
	out = make(http.Header, len(h)+keys+extra)
	i := 0
	for k, v := range h {
		if v == nil {
			out[k] = nil
			continue
		}
		c := copy(vals[i:n], v)
		out[k] = vals[i : i+c : i+c]
		i += c
	}
	return out, vals[n : n+extra : n+extra]
}

// withoutKeys returns h without the named keys (in any letter case), h
// itself when it holds none of them.
func withoutKeys(h http.Header, names []string) (_ http.Header, cloned bool) {
	var out http.Header
	for k := range h {
		if containsFold(names, k) {
			if out == nil {
				out = h.Clone()
			}
			delete(out, k)
		}
	}
	if out == nil {
		return h, false
	}
	return out, true
}
