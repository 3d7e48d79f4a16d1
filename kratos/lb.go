package graylbkratos

import (
	"context"
	"errors"
	"time"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// This file is the package's one door into graylb's adapter surface
// (package adapter): every routing call the selector and the middleware
// make goes through the names below.

type (
	balancer     = adapter.Balancer
	endpoints    = adapter.Endpoints[selector.Node]
	nodeEndpoint = adapter.Endpoint[selector.Node]
	route        = adapter.EndpointRoute[selector.Node]
	call         = adapter.Call
	result       = adapter.Result
	admitter     = adapter.Admitter
	admission    = adapter.Admission
	kept         = adapter.Kept
)

// balancerOf is lb's adapter surface; obtained once per Builder or
// middleware and kept.
func balancerOf(lb *graylb.LoadBalancer) *balancer { return adapter.For(lb) }

// newEndpoints builds a routing snapshot of service over the nodes of
// list, every one usable, under the rules and ejections in force.
func newEndpoints(b *balancer, service string, list []nodeEndpoint) (*endpoints, error) {
	return adapter.NewEndpoints(b, service, list, nil)
}

// routeCall runs e's routing for the call in ctx, whose own keys h reads.
func routeCall(ctx context.Context, e *endpoints, h graylb.ContextHandler) (route, error) {
	return e.Route(ctx, h)
}

// resultOf is the result of a call that ended with err: what
// adapter.ResultOf reads (cancelled, the caller's deadline passed without
// an answer), else adapter.HTTPResult of the HTTP code Kratos maps err to
// (the status of an HTTP answer; for a gRPC status, the HTTP code it
// stands for): 499 (a cancelled gRPC call) is Cancelled; 504 (an HTTP
// 504, a gRPC DeadlineExceeded status) is DeadlineAnswered; 501
// (Unimplemented: the caller's mistake) is OK; another 5xx (an
// unreachable node is a 503, Unknown a 500) is Failed; any other code is
// OK.
func resultOf(err error) result {
	if r, ok := adapter.ResultOf(err); ok {
		return r
	}
	return adapter.HTTPResult(int(kerrors.FromError(err).Code))
}

// resultOfDone is the result of a call with context ctx that ended as di
// says: resultOf its error, except that a gRPC DeadlineExceeded status is
// DeadlineNoAnswer, as grpcctx reads it, when no byte of it came from the
// node (di.BytesReceived false) or the call's deadline had passed: grpc-go
// made it at the caller's deadline, whatever came before (a stream that
// stalled), so the node did not answer in time (it counts against it). An
// HTTP call's error is Kratos' own (*errors.Error, decoded from an
// answer): a 504 there was answered.
func resultOfDone(ctx context.Context, di selector.DoneInfo) result {
	r := resultOf(di.Err)
	if r == adapter.DeadlineAnswered && (!di.BytesReceived || deadlinePassed(ctx)) && !isKratosError(di.Err) {
		return adapter.DeadlineNoAnswer
	}
	return r
}

// isKratosError reports whether err is or wraps a Kratos *errors.Error.
func isKratosError(err error) bool {
	var ke *kerrors.Error // escapes to errors.As: allocated when asked, not on every done
	return errors.As(err, &ke)
}

// bodyResult is the result of an HTTP call with context ctx whose
// headers, a success, read as r, and whose body's read and decode returned
// err: r when err is nil, else how the caller's context ended, else a
// failure of the node, as gRPC counts a message it cannot decode
// (Internal).
func bodyResult(ctx context.Context, r result, err error) result {
	if err == nil {
		return r
	}
	if r, ok := adapter.ResultOf(err); ok {
		return r
	}
	if deadlinePassed(ctx) {
		return adapter.DeadlineNoAnswer
	}
	return adapter.Failed
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

// versionKeyOf is the instance metadata key the LoadBalancer's version
// routing reads.
func versionKeyOf(b *balancer) string { return b.VersionMetadataKey() }

// stamp writes the request's routing state in ctx on the outgoing call
// whose keys out holds (adapter.Balancer.Stamp).
func stamp(ctx context.Context, b *balancer, out adapter.Carrier) { b.Stamp(ctx, out, nil) }

// onRoutingChange calls fn after every change that a routing snapshot
// does not follow by itself: rules, ejections and readmissions.
func onRoutingChange(b *balancer, fn func()) (stop func()) {
	stopRules := b.OnRulesChange(fn)
	stopEject := b.OnEjectionChange(func(string) { fn() })
	return func() { stopRules(); stopEject() }
}
