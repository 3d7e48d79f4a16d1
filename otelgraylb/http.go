package otelgraylb

import (
	"context"
	"net/http"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
)

// MiddlewareOption configures Middleware.
type MiddlewareOption func(*middleware)

type middleware struct {
	trusted func(*http.Request) bool
}

// WithTrusted marks a trust boundary: for a request for which pred
// returns false, nothing of its baggage routes. The members named by the
// LoadBalancer's keys are removed from its baggage header and from the
// context's OpenTelemetry baggage, so they neither count here nor travel
// on with OpenTelemetry's own propagation; other members are left alone.
// A nil pred trusts every request (internal traffic, the default). Use the
// same predicate as httpctx.WithTrusted.
func WithTrusted(pred func(*http.Request) bool) MiddlewareOption {
	return func(m *middleware) { m.trusted = pred }
}

// Middleware returns server middleware that takes the routing values of
// lb's keys from the W3C baggage of a trusted request (its baggage header,
// and any baggage OpenTelemetry's own instrumentation already put on the
// context) and keeps them on the request context for Handler. A value the
// request carries as a header still wins, when httpctx.Handler comes
// first in lb's ContextHandlers.
func Middleware(lb *graylb.LoadBalancer, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	var m middleware
	for _, o := range opts {
		if o != nil {
			o(&m)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			fromHeader := headerBaggage(r.Header)
			if m.trusted != nil && !m.trusted(r) {
				ctx = baggage.ContextWithBaggage(ctx, Strip(lb, baggage.FromContext(ctx)))
				r = r.Clone(ctx)
				r.Header.Del("Baggage")
				if b := Strip(lb, fromHeader); b.Len() > 0 {
					r.Header.Set("Baggage", b.String())
				}
				next.ServeHTTP(w, r)
				return
			}
			ctx = Keep(ctx, lb, baggage.FromContext(ctx))
			ctx = Keep(ctx, lb, fromHeader) // the header wins over the context's
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// NewTransport returns an http.RoundTripper that writes the routing values
// of lb's keys into the W3C baggage header of each request, beside the
// members it already has, and sends it with base (nil:
// http.DefaultTransport). For each key the value is the request's header,
// else the incoming header a server side admitted (httpctx.Middleware or
// any other), else the value kept
// from baggage; the gray key also gets a kind decided by rules (see
// Outgoing). Services between two graylb services that propagate baggage
// but not graylb's headers then pass the gray decision on.
//
// Put it closest to the wire, as the base of the graylb Transport
// (httpctx.WithBase), where the request has the headers that Transport
// writes, the routed kind included; and inside any instrumentation that
// sets the baggage header from the context, which would replace it.
// It does not modify the caller's request.
func NewTransport(lb *graylb.LoadBalancer, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{lb: lb, base: base}
}

type transport struct {
	lb   *graylb.LoadBalancer
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	kept := adapter.KeptFrom(ctx)
	values := Outgoing(ctx, t.lb, func(name string) string {
		if v := req.Header.Get(name); v != "" {
			return v
		}
		return kept.Get(name)
	})
	if len(values) == 0 {
		return t.base.RoundTrip(req)
	}
	b := headerBaggage(req.Header)
	b = Merge(b, values...)
	if b.Len() == 0 {
		return t.base.RoundTrip(req)
	}
	out := req.Clone(ctx)
	out.Header.Set("Baggage", b.String())
	return t.base.RoundTrip(out)
}

// headerBaggage is the baggage of h's baggage headers alone (an invalid
// header counts as none, as OpenTelemetry's propagator treats it).
func headerBaggage(h http.Header) baggage.Baggage {
	return baggage.FromContext(propagation.Baggage{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
}
