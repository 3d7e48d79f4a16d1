package adapter

import (
	"context"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
	"github.com/graylb/graylb/internal/routestate"
)

// ShadowKey is the key that marks a shadow copy: a prod request an adapter
// mirrored to a gray instance (see package shadow). It is a routing key
// like the LoadBalancer's own: Admit keeps it (an untrusted caller's is
// deleted: no caller sets the mark) and Stamp passes it on, so every hop
// of the copy's path knows it.
const ShadowKey = "x-graylb-shadow"

// SampleValue is ShadowKey's value on a noise sample: a mirrored prod
// request sent to a second prod instance, whose answer tells which fields
// differ between two prod answers (see package shadow). It routes as the
// prod request it copies; its writes are refused like a shadow copy's.
const SampleValue = "sample"

// Shadowed reports whether the request served with ctx is a shadow copy:
// its calls go to gray instances only (a service with none fails them),
// and an adapter refuses its writes (package shadow).
func Shadowed(ctx context.Context) bool { return ctx != nil && routestate.From(ctx).IsShadow() }

// Copied reports whether the request served with ctx is a copy a mirror
// made of a prod request, a shadow copy or a noise sample: an adapter
// refuses its writes and mirrors none of its calls.
func Copied(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	st := routestate.From(ctx)
	return st.IsShadow() || st.IsSample()
}

// SampleCopy returns the context a noise sample of the request served with
// ctx is sent with: as Detach's (not cancelled with ctx, the request's
// routing state and the kind decided for it now, fixed), marked with
// ShadowKey SampleValue so that every hop refuses its writes.
func (b *Balancer) SampleCopy(ctx context.Context) context.Context {
	d := b.e().Detach(ctx)
	st := routestate.From(d).Detached(routestate.From(d).Decided())
	if st.Get(ShadowKey) == "" {
		st.Add(ShadowKey, SampleValue)
	}
	st.SetSample()
	return routestate.With(d, st)
}

// markCopy marks st, admitted with value v of ShadowKey, as a shadow copy
// ("true" in any case) or a noise sample (SampleValue).
func markCopy(st *routestate.State, v string) {
	switch {
	case graylb.IsGray(v):
		st.SetShadow()
	case strings.EqualFold(v, SampleValue):
		st.SetSample()
	}
}

// ShadowCopy returns the context a shadow copy of the request served with
// ctx is sent with: not cancelled with ctx (the copy outlives its
// primary; bound it with a deadline of its own), carrying the request's
// routing state and the shadow mark, so that the copy routes to gray
// instances only. The adapter writes ShadowKey "true" on the copy
// (Stamp does).
func ShadowCopy(ctx context.Context) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	st := routestate.From(ctx).Detached(routestate.Decided{Set: true, Kind: uint8(engine.Gray), Source: uint8(engine.FromKey)})
	if st.Get(ShadowKey) == "" {
		st.Add(ShadowKey, "true")
	}
	st.SetShadow()
	return routestate.With(context.Background(), st)
}
