package engine

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/graylb/graylb/internal/routestate"
)

// valuesCtx is the context WithValue returns: its parent with one
// program-set name/value pair, and a link to the nearest pair set above it,
// so the pairs form an immutable list, newest first. A pick finds the list
// with a type assertion when the context it is given is one of these, and
// asks ctx.Value otherwise (a context derived from one, such as a timeout).
type valuesCtx struct {
	context.Context
	name, value string
	up          *valuesCtx        // the next pair above, nil when none
	state       *routestate.State // the parent's routing state, found once (stateIn)
}

// valuesKey is the key under which a valuesCtx answers Value with itself.
type valuesKey struct{}

// Value returns the newest valuesCtx for valuesKey and the parent's
// routing state for routestate.Key, else asks the parent.
func (c *valuesCtx) Value(key any) any {
	switch key.(type) {
	case valuesKey:
		return c
	case routestate.Key:
		return c.state
	}
	return c.Context.Value(key)
}

// stateIn returns the routing state on ctx (routestate.From), without
// walking the context when ctx is a WithValue context (inlined).
func stateIn(ctx context.Context) *routestate.State {
	if c, ok := ctx.(*valuesCtx); ok {
		return c.state
	}
	return routestate.From(ctx)
}

// String names the context and its parent, as the context package's own
// do, with the name it carries but not the value (a user id is no text
// for a log).
func (c *valuesCtx) String() string {
	var parent string
	if s, ok := c.Context.(interface{ String() string }); ok {
		parent = s.String()
	} else {
		parent = fmt.Sprintf("%T", c.Context)
	}
	return parent + ".WithValue(graylb " + c.name + ")"
}

// WithValue keeps the name in lower case (ASCII), converted here once rather
// than at each read.

// WithValue is graylb.WithValue.
func WithValue(ctx context.Context, name, value string) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return &valuesCtx{Context: ctx, name: lowerASCII(name), value: value, up: valuesIn(ctx), state: stateIn(ctx)}
}

// ValueFrom is graylb.ValueFrom.
func ValueFrom(ctx context.Context, name string) string {
	if ctx == nil {
		return ""
	}
	return valuesIn(ctx).get(name)
}

// noValues stands for a context without program-set values in a Request:
// one made by the LoadBalancer has read its context's values once, a zero
// Request has not (nil).
var noValues = &valuesCtx{}

// valuesIn returns the newest program-set pair of ctx (not nil), nil when
// it has none.
func valuesIn(ctx context.Context) *valuesCtx {
	if c, ok := ctx.(*valuesCtx); ok {
		return c
	}
	return valuesAbove(ctx)
}

// valuesAbove is valuesIn for a context of another type.
func valuesAbove(ctx context.Context) *valuesCtx {
	c, _ := ctx.Value(valuesKey{}).(*valuesCtx)
	return c
}

// get returns the newest value under name, in any letter case, "" when
// there is none.
func (c *valuesCtx) get(name string) string {
	for ; c != nil; c = c.up {
		if sameName(c.name, name) {
			return c.value
		}
	}
	return ""
}

// sameNameApart is sameName for names of one length in different memory,
// out of line: the flat walk compares names without a call when they are
// the same bytes, and calls this for the rest.
//
//go:noinline
func sameNameApart(lower, name string) bool { return routestate.SameName(lower, name) }

// sameName reports whether lower (a name WithValue kept, in lower case)
// is name in any letter case (routestate.SameName: without a loop when both
// are the same bytes in memory, as a key name constant passed to WithValue
// and asked for on the pick path are).
func sameName(lower, name string) bool { return routestate.SameName(lower, name) }

// sameString is a == b that answers without a call when both are the same
// bytes in memory (a name constant and the same constant passed in), as
// they usually are on the pick path.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// lowerASCII returns s in ASCII lower case; s itself (no copy) when it
// has no upper-case letter.
func lowerASCII(s string) string { return routestate.Lower(s) }
