package adapter

import (
	"context"

	"github.com/graylb/graylb/internal/engine"
	"github.com/graylb/graylb/internal/routestate"
)

// ShadowKey is the key that marks a shadow copy: a prod request an adapter
// mirrored to a gray instance (see package shadow). It is a routing key
// like the LoadBalancer's own: Admit keeps it (an untrusted caller's is
// deleted: no caller sets the mark) and Stamp passes it on, so every hop
// of the copy's path knows it.
const ShadowKey = "x-graylb-shadow"

// Shadowed reports whether the request served with ctx is a shadow copy:
// its calls go to gray instances only (a service with none fails them),
// and an adapter refuses its writes (package shadow).
func Shadowed(ctx context.Context) bool { return ctx != nil && routestate.From(ctx).IsShadow() }

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
