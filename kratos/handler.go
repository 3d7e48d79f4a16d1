package graylbkratos

import (
	"context"
	"net/textproto"
	"strings"

	"github.com/go-kratos/kratos/v2/transport"
	"github.com/graylb/graylb"
)

// keptKey carries the values the server middleware kept on a request's
// context.
type keptKey struct{}

// kept are the routing values of the request being served, as the server
// middleware let them through: name (lower case) and value pairs.
type kept []string

func (k kept) get(name string) string {
	for i := 0; i+1 < len(k); i += 2 {
		if strings.EqualFold(k[i], name) {
			return k[i+1]
		}
	}
	return ""
}

func keptFrom(ctx context.Context) kept {
	k, _ := ctx.Value(keptKey{}).(kept)
	return k
}

// Handler returns the graylb.ContextHandler over Kratos' transports: the
// header of the call being made (the client transport's request header,
// where the client middleware writes), then the values of the request
// being served as the server middleware kept them. The raw header of the
// request being served is never read: what a caller sent counts only once
// the server middleware (and its trust boundary) let it through.
//
// The Selector reads these itself; register Handler
// (graylb.WithContextHandler) for picks the program makes by hand with a
// Kratos context (lb.Pick(ctx, ...)).
func Handler() graylb.ContextHandler { return defaultHandler }

var defaultHandler = newHandler(graylb.DefaultKeys())

// handler reads the call's keys without allocating for the LoadBalancer's
// own key names.
type handler struct {
	canon [][2]string // name, canonical header form
}

func newHandler(keys graylb.Keys) *handler {
	h := &handler{}
	for _, n := range keys.Names() {
		h.canon = append(h.canon, [2]string{n, textproto.CanonicalMIMEHeaderKey(n)})
	}
	return h
}

func (h *handler) canonical(name string) string {
	for _, c := range h.canon {
		if c[0] == name {
			return c[1]
		}
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

func (h *handler) Value(ctx context.Context, name string) string {
	if tr, ok := transport.FromClientContext(ctx); ok {
		if r := httpRequest(tr); r != nil {
			if v := r.Header[h.canonical(name)]; len(v) > 0 && v[0] != "" {
				return v[0]
			}
		} else if v := tr.RequestHeader().Get(name); v != "" {
			return v
		}
	}
	return keptFrom(ctx).get(name)
}
