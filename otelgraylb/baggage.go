package otelgraylb

import (
	"context"
	"net/url"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"go.opentelemetry.io/otel/baggage"
)

// MaxValueLen bounds a routing value taken from baggage, in bytes.
const MaxValueLen = 256

// keptKey carries the routing values a server took from a trusted
// caller's baggage.
type keptKey struct{}

// kept is the routing values taken from baggage, by key name.
type kept map[string]string

// Handler returns the ContextHandler over W3C baggage: the values of
// lb's keys (gray, user, version) that a server side kept from a trusted
// caller's baggage (Middleware, the grpcbaggage interceptors, or Keep).
// Chain it after the header or metadata handler, so a value the call
// carries as a header wins and baggage counts only when there is none:
//
//	graylb.WithContextHandler(httpctx.Handler(), otelgraylb.Handler())
//
// It never reads the context's OpenTelemetry baggage itself: baggage that
// no trust check let through does not route.
func Handler() graylb.ContextHandler { return handler{} }

type handler struct{}

func (handler) Value(ctx context.Context, name string) string {
	if k, _ := ctx.Value(keptKey{}).(kept); k != nil {
		return k[name]
	}
	return ""
}

// Keep returns ctx carrying the members of b named by lb's keys (see
// graylb.LoadBalancer.Keys) for Handler. Call it only with baggage of a
// caller you trust. A member whose value is not a plausible routing value
// (see ValidValue) is ignored.
func Keep(ctx context.Context, lb *graylb.LoadBalancer, b baggage.Baggage) context.Context {
	if b.Len() == 0 {
		return ctx
	}
	var k kept
	for _, name := range lb.Keys().Names() {
		if v := b.Member(name).Value(); ValidValue(v) {
			if k == nil {
				k = kept{}
			}
			k[name] = v
		}
	}
	if k == nil {
		return ctx
	}
	return context.WithValue(ctx, keptKey{}, k)
}

// Kept returns the value of name kept by Keep on ctx, or "".
func Kept(ctx context.Context, name string) string { return handler{}.Value(ctx, name) }

// Strip returns b without the members named by lb's keys: what an
// untrusted caller's baggage may keep.
func Strip(lb *graylb.LoadBalancer, b baggage.Baggage) baggage.Baggage {
	for _, name := range lb.Keys().Names() {
		b = b.DeleteMember(name)
	}
	return b
}

// ValidValue reports whether v may route: 1 to MaxValueLen bytes of
// visible ASCII (no space, no control character), so that it can travel
// on as a header or metadata value unchanged.
func ValidValue(v string) bool {
	if v == "" || len(v) > MaxValueLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// Merge returns b with a member name=value for each pair of values (name,
// value, name, value...) whose value is valid; others are skipped.
func Merge(b baggage.Baggage, values ...string) baggage.Baggage {
	for i := 0; i+1 < len(values); i += 2 {
		if !ValidValue(values[i+1]) {
			continue
		}
		m, err := baggage.NewMember(values[i], url.PathEscape(values[i+1]))
		if err != nil {
			continue
		}
		if nb, err := b.SetMember(m); err == nil {
			b = nb
		}
	}
	return b
}

// Outgoing returns the values of lb's keys to write into an outgoing
// call's baggage, as name, value pairs: for each key, get(name) (the
// value the call carries, or that the program kept), else the value kept
// from baggage; for the gray key, when neither has one and lb's rules, a
// context value or the caller's own flag decided the kind, that kind.
func Outgoing(ctx context.Context, lb *graylb.LoadBalancer, get func(name string) string) []string {
	keys := lb.Keys()
	var out []string
	for _, name := range keys.Names() {
		v := ""
		if get != nil {
			v = get(name)
		}
		if v == "" {
			v = Kept(ctx, name)
		}
		if v == "" && name == keys.Gray {
			if d := adapter.For(lb).Decide(ctx, nil); !d.Source.Travels() {
				v = map[graylb.Kind]string{graylb.Prod: "false", graylb.Gray: "true"}[d.Kind]
			}
		}
		if v != "" {
			out = append(out, name, v)
		}
	}
	return out
}
