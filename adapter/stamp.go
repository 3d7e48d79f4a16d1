package adapter

import (
	"context"

	"github.com/graylb/graylb"
)

// Stamp writes the request's routing state on a call it makes, the mirror
// of Admit: out holds the outgoing call's keys, d the decision the adapter
// routed the call with (Route.Decision), nil to decide it here from ctx
// and out's keys. In out, Stamp
//   - deletes every routing key (as Admit names them, and the match rules'
//     keys) when the request's caller is untrusted: a proxy copies the
//     caller's keys onto the calls it forwards, under any LoadBalancer's
//     names, so no LoadBalancer of the process reads them;
//   - sets each key the request's server side admitted that out lacks,
//     but the gray key;
//   - sets the gray key to "true" or "false", the decided kind, whenever
//     something decided it (a key in any letter case or spelling, a rule,
//     the canary, a context value, the caller's own flag) or the caller is
//     untrusted; a request nobody classified gets none, so later hops'
//     rules still apply to it;
//   - sets the version key to the lane a match rule gave, when out has no
//     version;
//   - when the LoadBalancer reads baggage (WithBaggage), sets the
//     routing keys out then carries as members of its baggage header too.
//
// A nil Balancer only sets the admitted keys out lacks. It changes
// nothing else of out. With d nil, Stamp deletes before it
// decides, reading out's keys (through its Value when out is also a
// graylb.ContextHandler over its keys, which saves an allocation); an
// adapter that routes deletes the routing keys from what it routes by
// (Untrusted) before it routes.
func (b *Balancer) Stamp(ctx context.Context, out Carrier, d *Decision) {
	if ctx == nil {
		ctx = context.Background()
	}
	if b == nil {
		kept := KeptFrom(ctx)
		for i := 0; i < kept.Len(); i++ {
			if k, v := kept.At(i); out.Get(k) == "" {
				out.Set(k, v)
			}
		}
		return
	}
	grayKey, versionKey := b.e().GrayHeader(), b.e().VersionHeader()
	untrusted := UntrustedCaller(ctx)
	if untrusted {
		b.Untrusted(out)
	}
	kept := KeptFrom(ctx)
	for i := 0; i < kept.Len(); i++ {
		if k, v := kept.At(i); !sameFold(k, grayKey) && out.Get(k) == "" {
			out.Set(k, v)
		}
	}
	var dd Decision
	if d == nil {
		r, ok := out.(graylb.ContextHandler) // saves boxing a carrierReader
		if !ok {
			r = carrierReader{out}
		}
		dd = b.Decide(ctx, r)
		d = &dd
	}
	if d.Source != FromDefault || untrusted {
		want := "false"
		if d.Kind == graylb.Gray {
			want = "true"
		}
		if out.Get(grayKey) != want {
			out.Set(grayKey, want)
		}
	}
	if d.Lane != "" && out.Get(versionKey) == "" {
		out.Set(versionKey, d.Lane)
	}
	if bag := b.baggage(); bag != nil {
		stampBaggage(bag, out, kept, grayKey, versionKey)
	}
}

// stampBaggage writes in out's baggage header the routing keys out
// carries now: the admitted ones, the gray key and the version key.
func stampBaggage(bag Baggage, out Carrier, kept Kept, grayKey, versionKey string) {
	var pairs []string
	for i := 0; i < kept.Len(); i++ {
		if k, _ := kept.At(i); !sameFold(k, grayKey) && !sameFold(k, versionKey) {
			if v := out.Get(k); v != "" {
				pairs = append(pairs, k, v)
			}
		}
	}
	for _, k := range [...]string{grayKey, versionKey} {
		if v := out.Get(k); v != "" {
			pairs = append(pairs, k, v)
		}
	}
	if len(pairs) == 0 {
		return
	}
	h := bag.Header()
	v := out.Get(h)
	if nv := bag.With(v, pairs...); nv != v {
		out.Set(h, nv)
	}
}

// Untrusted deletes from out, the keys of a call made for an untrusted
// caller, every routing key (as Admit names them, and the match rules'
// keys), in any letter case, and their members of its baggage: what an
// adapter that routes by the call's own keys does before it routes.
func (b *Balancer) Untrusted(out Carrier) {
	a := b.Admitter()
	for _, n := range a.names {
		out.Delete(n)
	}
	for _, n := range b.MatchKeys() {
		out.Delete(n)
	}
	if bag := b.baggage(); bag != nil {
		stripBaggage(bag, out, a.Routing)
	}
}

// carrierReader reads a Carrier's keys for a decision.
type carrierReader struct{ c Carrier }

func (r carrierReader) Value(_ context.Context, name string) string { return r.c.Get(name) }

// sameFold reports whether a and b are one name in any letter case.
func sameFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
