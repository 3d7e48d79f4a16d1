package otelgraylb

import (
	"context"
	"net/url"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"go.opentelemetry.io/otel/baggage"
)

// MaxValueLen bounds a routing value taken from baggage, in bytes.
const MaxValueLen = 256

// WithBaggage makes W3C baggage a carrier of routing keys like headers and
// metadata, read with OpenTelemetry's parser: every adapter of a
// LoadBalancer made with it reads the routing members of a call's baggage
// header where it admits the call (under the same trust boundary and key
// names as the call's own keys, which win), strips them from an untrusted
// caller's header and from the context's OpenTelemetry baggage, and
// writes them on the calls it makes:
//
//	lb, _ := graylb.New(reg, otelgraylb.WithBaggage())
//
// A member routes only when its value is a plausible routing value (see
// ValidValue). A baggage header OpenTelemetry cannot parse carries no
// routing key, and an untrusted caller's is dropped whole.
func WithBaggage() graylb.Option { return adapter.WithBaggage(Baggage()) }

// Baggage is the adapter.Baggage WithBaggage installs.
func Baggage() adapter.Baggage { return codec{} }

type codec struct{}

func (codec) Header() string { return "baggage" }

func (codec) Members(v string, names []string) []string {
	b, err := baggage.Parse(v)
	if err != nil {
		return nil
	}
	out := make([]string, len(names))
	for _, m := range b.Members() {
		for i, n := range names {
			if out[i] == "" && strings.EqualFold(m.Key(), n) && ValidValue(m.Value()) {
				out[i] = m.Value()
			}
		}
	}
	return out
}

func (codec) Without(v string, drop func(string) bool) string {
	b, err := baggage.Parse(v)
	if err != nil {
		return ""
	}
	return without(b, drop).String()
}

func (codec) With(v string, pairs ...string) string {
	b, err := baggage.Parse(v)
	if err != nil {
		b = baggage.Baggage{}
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if !ValidValue(pairs[i+1]) {
			continue
		}
		b = without(b, func(k string) bool { return strings.EqualFold(k, pairs[i]) })
		m, err := baggage.NewMember(pairs[i], url.PathEscape(pairs[i+1]))
		if err != nil {
			continue
		}
		if nb, err := b.SetMember(m); err == nil {
			b = nb
		}
	}
	return b.String()
}

func (codec) ContextWithout(ctx context.Context, drop func(string) bool) context.Context {
	b := baggage.FromContext(ctx)
	if nb := without(b, drop); nb.Len() != b.Len() {
		return baggage.ContextWithBaggage(ctx, nb)
	}
	return ctx
}

// without returns b without the members drop names (in any letter case:
// drop compares as it will).
func without(b baggage.Baggage, drop func(string) bool) baggage.Baggage {
	for _, m := range b.Members() {
		if drop(m.Key()) {
			b = b.DeleteMember(m.Key())
		}
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
