package graylbkratos

import (
	"context"
	"net/textproto"

	"github.com/go-kratos/kratos/v2/transport"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// keptFrom returns the routing keys admitted for the request served with
// ctx, over any transport.
func keptFrom(ctx context.Context) kept { return adapter.KeptFrom(ctx) }

// Handler returns the graylb.ContextHandler over Kratos' transports: the
// header of the call being made (the client transport's request header,
// where the client middleware writes), then the keys a server side
// admitted for the request being served (Server, or any other adapter's
// server side). The raw header of the request being served is never read:
// what a caller sent counts only once a server side (and its trust
// boundary) let it through.
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
	return keptFrom(ctx).Get(name)
}
