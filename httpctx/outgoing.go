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
// address, the Host it gets and the request's routing state (Stamp), in
// one allocation with the body its response will have. The header is
// req's own until something is written to it, then a clone.
//
// folded: req's header has keys not in canonical form, which the copy's
// written keys must not stand beside.
func (t *Transport) outgoing(req *http.Request, host, addr string, route adapter.Route, folded bool) *requestCopy {
	c := &requestCopy{r: *req, u: *req.URL}
	out := &c.r
	out.URL = &c.u
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
	ctx := req.Context()
	h := &c.h // in c's allocation: Stamp's Carrier costs none of its own
	h.t, h.h, h.folded, h.kept = t, out.Header, folded, adapter.KeptFrom(ctx)
	t.lb.Stamp(ctx, h, &route.Decision)
	out.Header, *h = h.h, headerOut{}
	return c
}

// requestCopy is an outgoing request, its URL, the body of its response
// (see Transport.answered, body) and the Carrier its header is written
// through: one allocation per try.
type requestCopy struct {
	r http.Request
	u url.URL
	b body
	h headerOut
}

// headerOut is a request's header as the Carrier Stamp writes: it is
// cloned before the first change (with room for the admitted keys and two
// values more, in two allocations), a value the request's server side
// admitted is written as its routing state holds it (a shared one-element
// slice, no copy), and a key is written in one spelling.
type headerOut struct {
	t      *Transport
	h      http.Header
	owned  bool
	folded bool // h has keys not in canonical form
	kept   adapter.Kept
	spare  []string // room for values written, in the clone's one array
}

func (o *headerOut) own() {
	if !o.owned {
		o.h, o.spare = cloneHeader(o.h, o.kept.Len(), 2)
		o.owned = true
	}
}

// name is the canonical form of name, without allocating for the
// LoadBalancer's keys.
func (o *headerOut) name(name string) string {
	if c, ok := o.t.canon[name]; ok {
		return c
	}
	return canonical(name)
}

func (o *headerOut) Get(name string) string {
	ck := o.name(name)
	if v := o.h[ck]; len(v) > 0 || !o.folded {
		if len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return get(o.h, name)
}

func (o *headerOut) Set(name, v string) {
	o.own()
	ck := o.name(name)
	if o.folded {
		o.drop(ck)
	}
	for i := 0; i < o.kept.Len(); i++ {
		if k, kv := o.kept.At(i); kv == v && strings.EqualFold(k, name) {
			o.h[ck] = o.kept.Values(i)
			return
		}
	}
	if len(o.spare) == 0 {
		o.spare = make([]string, 2)
	}
	one := o.spare[:1:1]
	one[0] = v
	o.spare = o.spare[1:]
	o.h[ck] = one
}

func (o *headerOut) Delete(name string) {
	if get(o.h, name) == "" && !has(o.h, o.name(name), true) {
		return
	}
	o.own()
	delete(o.h, o.name(name))
	o.drop(o.name(name))
}

// drop deletes the spellings of ck other than ck itself.
func (o *headerOut) drop(ck string) {
	for k := range o.h {
		if k != ck && len(k) == len(ck) && strings.EqualFold(k, ck) {
			delete(o.h, k)
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
