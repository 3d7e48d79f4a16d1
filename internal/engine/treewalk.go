package engine

import (
	"context"
	"unsafe"

	"github.com/graylb/graylb/internal/routestate"
)

// route walks the tree for one request. It returns the leaf (nil when a
// stage chose no subset or the leaf is empty), the request's kind, the
// outcome and the lane a match rule gave the request (the filters see it
// as Request.Lane).
func (t *tree) route(r *Request) (*node, decision) {
	i, d := t.gray.decide(r)
	r.lane = d.lane
	if i != grayIdxNone {
		if n := walk(t.children[i], r); n != nil {
			return n, d
		}
	}
	d.outcome = Failed
	return nil, d
}

// walk routes the request in ctx (not nil): it sets *d to the decision,
// tells observe (when not nil) what was decided, and returns the leaf
// whose candidates the request may reach, or the error of a request whose
// kind has no instance (the decision's outcome Failed). call (nil: none)
// reads the keys of an adapter's call, asked before h, the LoadBalancer's
// ContextHandlers. Every adapter's route walks it (the Transport, the gRPC
// picker, a framework's selector); lb.Pick takes pick, which routes as
// walk does (leafOf) and picks in the leaf it reaches.
//
// A plain tree (see tree.plain) is walked in its flat form: the request's
// own gray value (else the canary's draw recorded for the request being
// served) decides its kind, as decide does when no rule classifies
// requests, and its version picks the leaf; no Request is built.
func (t *tree) walk(ctx context.Context, call, h ContextHandler, observe Observer, d *decision) (*node, error) {
	n := t.leafOf(ctx, call, h, d)
	if observe != nil {
		observe(t.service, d.kind, d.outcome)
	}
	if n == nil {
		return nil, t.noInstance(d.kind)
	}
	return n, nil
}

// leafOf is walk's routing: the leaf, nil when the request's kind has
// none.
//
// It walks the common request itself: a plain tree, no reader of keys (no
// adapter's call, no ContextHandler), and a context whose values were set
// by WithValue under the very key names the tree asks for, with no
// admitted state. Anything else (a name in another letter case too) goes
// to leafOfKeyed, so that this walk calls nothing but a version's
// comparison.
func (t *tree) leafOf(ctx context.Context, call, h ContextHandler, d *decision) *node {
	c, ok := ctx.(*valuesCtx)
	if !ok || !t.plain || call != nil || h != nil || c.state != nil {
		return t.leafOfKeyed(ctx, call, h, d)
	}
	v, source := "", FromDefault
	for e := c; e != nil; e = e.up {
		if len(e.name) == len(t.grayKey) {
			if unsafe.StringData(e.name) != unsafe.StringData(t.grayKey) {
				return t.leafOfKeyed(ctx, call, h, d)
			}
			v, source = e.value, FromContext
			break
		}
	}
	if v == "" {
		source = FromDefault
	}
	kind, outcome, i := Prod, Selected, grayIdxProd
	if IsGray(v) {
		kind, i = Gray, grayIdxGray
		if !t.gray.hasGray {
			i, outcome = grayIdxAll, FellBack
		}
	}
	fr := &t.flat[i]
	leaf := &fr.leaves[0]
	if len(fr.leaves) > 1 { // a version stage's leaves
		v = ""
		for e := c; e != nil; e = e.up {
			if len(e.name) == len(t.versionKey) {
				if unsafe.StringData(e.name) != unsafe.StringData(t.versionKey) {
					return t.leafOfKeyed(ctx, call, h, d)
				}
				v = e.value
				break
			}
		}
		leaf = &fr.leaves[fr.choice.choose(v, t.versionSelf)]
	}
	if len(leaf.instances) == 0 {
		outcome, leaf = Failed, nil
	}
	d.kind, d.source, d.outcome = kind, source, outcome
	return leaf
}

// leafOfKeyed is leafOf for every request.
func (t *tree) leafOfKeyed(ctx context.Context, call, h ContextHandler, d *decision) *node {
	if !t.plain {
		var r Request
		r.init(ctx, t.service, h, valuesIn(ctx))
		r.call = call
		n, rd := t.route(&r)
		*d = rd
		return n
	}
	d.kind, d.source, d.outcome = Prod, FromKey, Selected
	// The keys of a call, the ContextHandlers' and an admitted state's are
	// read out of line (keyed), the WithValue values here.
	var vals *valuesCtx
	var st *routestate.State
	if c, ok := ctx.(*valuesCtx); ok {
		vals, st = c, c.state
	} else {
		vals, st = valuesAbove(ctx), routestate.From(ctx)
	}
	keys := call != nil || h != nil || st != nil
	v := ""
	if keys {
		v = keyed(ctx, call, h, st, t.grayKey, routestate.RoleGray)
	}
	if v == "" {
		for c := vals; c != nil; c = c.up { // vals.get, written out
			if len(c.name) == len(t.grayKey) && (unsafe.StringData(c.name) == unsafe.StringData(t.grayKey) || sameNameApart(c.name, t.grayKey)) {
				v = c.value
				break
			}
		}
		if v != "" {
			d.source = FromContext
		} else if st != nil {
			v, d.source = settledKind(st)
		} else {
			d.source = FromDefault
		}
	}
	i := grayIdxProd
	if st.IsShadow() { // a shadow copy is gray whatever its keys say
		v, d.source = "true", FromKey
	}
	if IsGray(v) {
		d.kind, i = Gray, grayIdxGray
		if !t.gray.hasGray {
			if st.IsShadow() {
				d.outcome = Failed // a shadow copy never falls back to prod
				return nil
			}
			i, d.outcome = grayIdxAll, FellBack
		}
	}
	fr := &t.flat[i]
	leaf := &fr.leaves[0]
	if len(fr.leaves) > 1 { // a version stage's leaves
		v = ""
		if keys {
			v = keyed(ctx, call, h, st, t.versionKey, routestate.RoleVersion)
		}
		if v == "" {
			for c := vals; c != nil; c = c.up { // vals.get, written out
				if len(c.name) == len(t.versionKey) && (unsafe.StringData(c.name) == unsafe.StringData(t.versionKey) || sameNameApart(c.name, t.versionKey)) {
					v = c.value
					break
				}
			}
		}
		leaf = &fr.leaves[fr.choice.choose(v, t.versionSelf)]
	}
	if len(leaf.instances) == 0 {
		d.outcome = Failed
		return nil
	}
	return leaf
}

// pick is walk picking, for lb.Pick: the same walk as every adapter's
// route (leafOf), then the leaf's turn. It returns the picked candidate in
// its leaf's list, or the error of a request whose kind has no instance.
func (t *tree) pick(ctx context.Context, h ContextHandler, observe Observer) (*Instance, error) {
	var d decision
	n := t.leafOf(ctx, nil, h, &d)
	var in *Instance
	switch {
	case n == nil:
	case n.ext == nil || n.ext.picker == nil:
		// node.next written out (it does not fit the inlining budget): the
		// single counter's turn (TryOne inlines), else the slow path.
		turn, ok := n.t.TryOne()
		if !ok {
			turn = n.t.Contended(uint64(n.t.N))
		}
		in = &n.instances[n.m.Of(uint32(turn), n.t.N)]
	default:
		in = &n.instances[n.ext.picker.Next()]
	}
	if observe != nil {
		observe(t.service, d.kind, d.outcome)
	}
	if in == nil {
		return nil, t.noInstance(d.kind)
	}
	return in, nil
}

// keyed returns the value under key of the call: call's, else h's, else
// the admitted state's (st: its key, else the key holding role for the
// LoadBalancer that admitted it), "" when none has one.
func keyed(ctx context.Context, call, h ContextHandler, st *routestate.State, key string, role routestate.Role) string {
	if call != nil {
		if v := call.Value(ctx, key); v != "" {
			return v
		}
	}
	if h != nil {
		if v := h.Value(ctx, key); v != "" {
			return v
		}
	}
	if st != nil {
		if v := st.Get(key); v != "" {
			return v
		}
		return st.Role(role)
	}
	return ""
}

// settledKind is the kind st settled for a request no key made gray or
// prod, as a gray value ("true" for gray) and what settled it: the
// decision Detach fixed, else another LoadBalancer's canary draw for the
// request, else nothing (FromDefault).
func settledKind(st *routestate.State) (string, KindSource) {
	if dd := st.Decided(); dd.Set {
		if dd.Kind == uint8(Gray) {
			return "true", KindSource(dd.Source)
		}
		return "", KindSource(dd.Source)
	}
	if gray, ok := st.Drawn(); ok {
		if gray {
			return "true", FromRules
		}
		return "", FromRules
	}
	return "", FromDefault
}

// noInstance is the error of a request of kind that t has no instance for.
func (t *tree) noInstance(kind Kind) error {
	e := &NoInstanceError{Service: t.service, Kind: kind, Ejected: t.ejected[Prod]}
	if kind == Gray {
		e.Ejected += t.ejected[Gray]
	}
	return e
}
