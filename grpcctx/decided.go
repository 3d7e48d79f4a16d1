package grpcctx

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/metadata"
)

// outgoingKey is the context key under which package metadata keeps a
// context's outgoing metadata, caught once through its public API (nil
// when it could not be caught: decidedCtx is then never used).
var outgoingKey = catchOutgoingKey()

// keyCatcher is a context that records the key it is asked for.
type keyCatcher struct {
	context.Context
	key any
}

func (c *keyCatcher) Value(key any) any {
	c.key = key
	return nil
}

func catchOutgoingKey() any {
	c := &keyCatcher{Context: context.Background()}
	metadata.ValueFromOutgoingContext(c, "k")
	if c.key == nil {
		return nil
	}
	// The key caught is the one the outgoing metadata is found under.
	probe := metadata.NewOutgoingContext(context.Background(), metadata.MD{"k": {"v"}})
	if probe.Value(c.key) == nil {
		return nil
	}
	return c.key
}

// decidedCtx is a call's context with the decision's outgoing metadata: a
// call that carries no outgoing metadata of its own gets the decision's,
// made once per kind and lane and shared (one allocation per call, where
// appending the pairs costs four). A context with outgoing metadata of its
// own gets the pairs appended instead: decidedCtx would hide it.
type decidedCtx struct {
	context.Context                 // the call's
	md              context.Context // holds the decision's outgoing metadata alone
}

func (c *decidedCtx) Value(key any) any {
	if key == outgoingKey {
		return c.md.Value(key)
	}
	return c.Context.Value(key)
}

// maxDecided bounds the decisions whose metadata is kept: a lane comes
// from the match rules in force, so the bound is reached only by rules
// that name more lanes; past it the pairs of a new decision are appended
// per call.
const maxDecided = 64

// decided is a decision as written on a call: the gray key's value and
// the lane, "" for each not written.
type decided struct{ gray, lane string }

// decisions makes the outgoing metadata of each decision once and keeps
// it. An MD stored here is never modified: package metadata and grpc-go
// only read it, from any goroutine.
type decisions struct {
	grayKey, versionKey     string // lower case, as metadata keys
	grayConfig, versionConf string // as the LoadBalancer names them
	mu                      sync.Mutex
	made                    atomic.Pointer[map[decided]context.Context]
}

func newDecisions(grayKey, versionKey string) *decisions {
	return &decisions{grayKey: lower(grayKey), versionKey: lower(versionKey), grayConfig: grayKey, versionConf: versionKey}
}

// lower is name as a metadata key, without allocating for the
// LoadBalancer's own keys.
func (d *decisions) lower(name string) string {
	switch name {
	case d.grayConfig:
		return d.grayKey
	case d.versionConf:
		return d.versionKey
	}
	return lower(name)
}

// with returns ctx carrying p's pairs (p has at least one) as outgoing
// metadata: a decidedCtx when ctx has no outgoing metadata, else ctx with
// the pairs appended.
func (d *decisions) with(ctx context.Context, p decided) context.Context {
	if outgoingKey != nil && ctx.Value(outgoingKey) == nil {
		if md := d.of(p); md != nil {
			return &decidedCtx{Context: ctx, md: md}
		}
	}
	var pairs [4]string // on the stack
	add := pairs[:0]
	if p.gray != "" {
		add = append(add, d.grayKey, p.gray)
	}
	if p.lane != "" {
		add = append(add, d.versionKey, p.lane)
	}
	return metadata.AppendToOutgoingContext(ctx, add...)
}

// of returns the context holding p's metadata, made on p's first call
// (nil when maxDecided are kept already).
func (d *decisions) of(p decided) context.Context {
	if m := d.made.Load(); m != nil {
		if c, ok := (*m)[p]; ok {
			return c
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.made.Load()
	n := 0
	if old != nil {
		if c, ok := (*old)[p]; ok {
			return c
		}
		n = len(*old)
	}
	if n >= maxDecided {
		return nil
	}
	md := metadata.MD{}
	if p.gray != "" {
		md[d.grayKey] = []string{p.gray}
	}
	if p.lane != "" {
		md[d.versionKey] = []string{p.lane}
	}
	c := metadata.NewOutgoingContext(context.Background(), md)
	next := make(map[decided]context.Context, n+1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[p] = c
	d.made.Store(&next)
	return c
}
