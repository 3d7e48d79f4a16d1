package grpcctx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// picker runs the chain with the RPC's context and the LoadBalancer's
// policy over the READY connections of the chosen candidates; Pick does
// not block and, on the common path, does not allocate. The kind a call's
// rules decided was written on the call by the client interceptors, so the
// picker reads the same decision.
//
// An instance whose connection failed (TRANSIENT_FAILURE, and not READY
// since) serves nobody: the picker routes as if it were not listed (live),
// so a gray RPC whose gray instances have all failed falls back to prod's
// READY connections, and a prod RPC never goes to gray. A connection being
// made is not failed: its RPCs queue, on their kind. When the request's
// kind has no instance left that has not failed, the RPC queues while a
// candidate connects, else fails at once with Unavailable and the last
// connection error (queues when wait-for-ready).
//
// An RPC ends at its status, when grpc-go calls its pick's Done: with
// Stats or a CallObserver every RPC is one adapter.Call, ended with the
// RPC's result (resultOf); one whose deadline passed before any status the
// server sent counts against the instance, and so does a wait for a
// connection its deadline ended (waits). The Done carries the Call in an
// object taken from a pool (callDone): no allocation per pick.
// docs/grpc.md has the whole behaviour.
type picker struct {
	live     atomic.Pointer[adapter.Endpoints[endpoint]] // over the instances whose connection has not failed
	all      atomic.Pointer[adapter.Endpoints[endpoint]] // over every instance; live itself when none has failed
	service  string
	failures failureSet
	waits    *waits // RPCs queued for connections being made
}

// endpoint is one instance's connection as a picker's routing sees it: a
// snapshot taken when the routing was built.
type endpoint struct {
	sc      balancer.SubConn
	state   connectivity.State
	failing bool  // see conn.failing
	err     error // the last connection error
}

// ready reports whether an RPC can be sent on e's connection now.
func ready(e endpoint) bool { return e.state == connectivity.Ready }

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.live.Load().Route(info.Ctx, handler{})
	if err == nil {
		if e, call, ok := rt.Start(); ok {
			return p.result(info, e, call), nil
		}
		if connecting(rt.Handles()) {
			p.wait(info, rt)
			return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
		}
	}
	return p.pickFailed(info)
}

// pickFailed picks for an RPC whose kind has no instance left whose
// connection has not failed: among every instance, as grpc-go's
// convention has it (see picker).
func (p *picker) pickFailed(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.all.Load().Route(info.Ctx, handler{})
	if err != nil {
		// The request's kind has no instance at all.
		return balancer.PickResult{}, status.Error(codes.Unavailable, err.Error())
	}
	if e, call, ok := rt.Start(); ok {
		return p.result(info, e, call), nil
	}
	if rt.Len() == 0 || connecting(rt.Handles()) {
		p.wait(info, rt)
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	// Not a status error: grpc-go fails a non-wait-for-ready RPC with
	// Unavailable and this message, and queues a wait-for-ready one.
	return balancer.PickResult{}, fmt.Errorf("grpcctx: no connection to the %s instances of %q: %w", rt.Kind, p.service, lastErr(rt.Handles()))
}

// connecting reports whether e's connection is being made: neither READY
// nor failed.
func (e endpoint) connecting() bool {
	return e.state != connectivity.Ready && e.state != connectivity.TransientFailure && !e.failing
}

// connecting reports whether a candidate of list is still connecting.
func connecting(list []endpoint) bool {
	for _, e := range list {
		if e.connecting() {
			return true
		}
	}
	return false
}

// wait notes that the RPC of info queues for rt's candidates whose
// connection is being made (see waits).
func (p *picker) wait(info balancer.PickInfo, rt adapter.EndpointRoute[endpoint]) {
	if p.waits == nil {
		return
	}
	var list []graylb.Instance
	insts := rt.Instances()
	for i, e := range rt.Handles() {
		if e.connecting() {
			list = append(list, insts[i])
		}
	}
	p.waits.add(info.Ctx, list)
}

// lastErr is the last connection error among the failed candidates.
func lastErr(list []endpoint) error {
	var err error
	for _, e := range list {
		if (e.state == connectivity.TransientFailure || e.failing) && e.err != nil {
			err = e.err
		}
	}
	if err == nil {
		err = errors.New("connection failed")
	}
	return err
}

// result is the pick of e for the RPC of info, started as call.
func (p *picker) result(info balancer.PickInfo, e endpoint, call adapter.Call) balancer.PickResult {
	res := balancer.PickResult{SubConn: e.sc}
	if call.Tracked() {
		res.Done = newCallDone(p, call, info.Ctx)
	}
	return res
}

// callDone is the Done of one RPC: it carries the RPC's Call and context. grpc-go
// calls a pick's Done at most once (when the attempt finishes, or at once
// when the picked connection turned out not to be ready), so once it has
// run the object serves another pick: a pool of them keeps the pick from
// allocating. One whose Done never runs is left to the collector.
type callDone struct {
	p    *picker
	call adapter.Call
	ctx  context.Context         // the RPC's
	fn   func(balancer.DoneInfo) // t.done, made once per object
}

var callDones sync.Pool // of *callDone

func init() {
	callDones.New = func() any {
		t := &callDone{}
		t.fn = t.done
		return t
	}
}

// newCallDone returns the Done of an RPC with context ctx picked as call.
func newCallDone(p *picker, call adapter.Call, ctx context.Context) func(balancer.DoneInfo) {
	t := callDones.Get().(*callDone)
	t.p, t.call, t.ctx = p, call, ctx
	return t.fn
}

func (t *callDone) done(di balancer.DoneInfo) {
	p, call, ctx := t.p, t.call, t.ctx
	t.p, t.call, t.ctx = nil, adapter.Call{}, nil
	callDones.Put(t)
	r := p.resultOf(ctx, di)
	if r == adapter.Overloaded {
		call = call.WithRetryAfter(pushback(di.Trailer))
	}
	call.End(r)
}

// pushback is the pause a server asked for in its trailers
// (grpc-retry-pushback-ms, as gRPC's retry design names it), 0 when none
// or malformed.
func pushback(md metadata.MD) time.Duration {
	v := md.Get("grpc-retry-pushback-ms")
	if len(v) != 1 {
		return 0
	}
	ms, err := strconv.ParseUint(v[0], 10, 32)
	if err != nil {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// resultOf is the result of an RPC with context ctx that ended as di says:
// what adapter.ResultOf reads of its error, else by its status code:
// Canceled is Cancelled; DeadlineExceeded, unless a failure code, is
// DeadlineAnswered when the server sent it (something came, grpc-go
// setting DoneInfo.BytesReceived once a HEADERS frame of the stream
// arrives, and the RPC's deadline had not passed) and DeadlineNoAnswer
// when grpc-go made it as the deadline passed, whatever came before; a
// failure code (the balancer config's) is Failed; ResourceExhausted,
// unless a failure code, is Overloaded; any other is OK. With
// DefaultFailureCodes an answered code reads as adapter.GRPCResult reads
// it, the reading every adapter shares.
func (p *picker) resultOf(ctx context.Context, di balancer.DoneInfo) adapter.Result {
	err := di.Err
	if r, ok := adapter.ResultOf(err); ok {
		return r
	}
	switch status.Code(err) {
	case codes.Canceled:
		return adapter.Cancelled
	case codes.DeadlineExceeded:
		if !p.failures.failed(err) {
			if di.BytesReceived && !deadlinePassed(ctx) {
				return adapter.DeadlineAnswered
			}
			return adapter.DeadlineNoAnswer
		}
	case codes.ResourceExhausted:
		if !p.failures.failed(err) {
			return adapter.Overloaded
		}
	}
	return adapter.Answer(p.failures.failed(err))
}

// deadlinePassed reports whether ctx (nil: none) has a deadline that has
// passed.
func deadlinePassed(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// errPicker fails every RPC with err.
type errPicker struct{ err error }

func (p errPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, p.err
}
