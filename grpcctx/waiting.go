package grpcctx

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"google.golang.org/grpc/connectivity"
)

// waits charges an RPC that waited for connections still being made
// (queued by the picker with ErrNoSubConnAvailable) and whose deadline
// ended the wait: a failure of each instance it waited for whose
// connection is still not READY then, with the time waited as its
// latency. An instance that accepts TCP connections and never completes
// the HTTP/2 handshake stays CONNECTING until grpc-go's connect timeout
// (20 s by default); its RPCs' deadlines eject it, and a gray RPC then
// falls back to prod instead of waiting for it.
//
// Only RPCs that find no READY connection of their kind get here (the
// picker prefers READY ones), so the common pick path costs nothing. An
// RPC is charged once, however many pickers it waited through.
type waits struct {
	b    *graylbBalancer
	rpcs sync.Map // context.Context of a waiting RPC → struct{}
}

// add notes that the RPC of ctx waits for insts' connections. A nil
// waits notes nothing.
func (w *waits) add(ctx context.Context, insts []graylb.Instance) {
	if w == nil || w.b == nil || len(insts) == 0 || ctx == nil || ctx.Done() == nil {
		return // a context that never ends never times out
	}
	if reflect.TypeOf(ctx).Kind() != reflect.Pointer {
		return // not usable as a key (grpc-go's attempt contexts are pointers)
	}
	if _, loaded := w.rpcs.LoadOrStore(ctx, struct{}{}); loaded {
		return
	}
	start := time.Now()
	list := slices.Clone(insts)
	context.AfterFunc(ctx, func() {
		w.rpcs.Delete(ctx)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			w.b.waitedFor(list, time.Since(start))
		}
	})
}

// waitedFor reports a failure, of latency waited, of each of list whose
// connection is still being made (neither READY nor failed: a failed one
// was reported when it failed).
func (b *graylbBalancer) waitedFor(list []graylb.Instance, waited time.Duration) {
	b.mu.Lock()
	src := b.src
	n := 0
	for _, in := range list {
		if c := b.conns[in.Addr()]; c != nil && c.state != connectivity.Ready && !c.failing {
			list[n] = in
			n++
		}
	}
	b.mu.Unlock()
	if src == nil {
		return
	}
	for _, in := range list[:n] {
		src.ab.Report(src.service, in, false, waited)
	}
}
