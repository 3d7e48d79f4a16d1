package grpcctx

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// resultOf maps an RPC's end to its Result: what adapter.ResultOf reads,
// then the status code against the balancer config's failure codes, a
// DeadlineExceeded by whether the server sent anything.
func TestPicker_ResultOf(t *testing.T) {
	p := &picker{failures: defaultFailureCodes}
	withDeadline := &picker{failures: newFailureSet([]codes.Code{codes.Unavailable, codes.DeadlineExceeded})}
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	soon, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, c := range []struct {
		p        *picker
		err      error
		answered bool // DoneInfo.BytesReceived: the server sent something
		want     adapter.Result
	}{
		{p, nil, false, adapter.OK},
		{p, status.Error(codes.Canceled, "x"), false, adapter.Cancelled},
		{p, context.Canceled, false, adapter.Cancelled},
		{p, fmt.Errorf("x: %w", context.DeadlineExceeded), false, adapter.DeadlineNoAnswer},
		{p, status.Error(codes.DeadlineExceeded, "x"), true, adapter.DeadlineAnswered},
		{p, status.Error(codes.DeadlineExceeded, "x"), false, adapter.DeadlineNoAnswer}, // grpc-go's own: no answer
		{withDeadline, status.Error(codes.DeadlineExceeded, "x"), false, adapter.Failed},
		{p, status.Error(codes.Unavailable, "x"), false, adapter.Failed},
		{p, status.Error(codes.Internal, "x"), false, adapter.Failed},
		{withDeadline, status.Error(codes.Internal, "x"), false, adapter.OK},
		{p, status.Error(codes.NotFound, "x"), false, adapter.OK},
		{p, status.Error(codes.ResourceExhausted, "x"), false, adapter.Overloaded},
		{withDeadline, status.Error(codes.ResourceExhausted, "x"), true, adapter.Overloaded},
	} {
		di := balancer.DoneInfo{Err: c.err, BytesReceived: c.answered}
		assert.Equal(t, c.want, c.p.resultOf(soon, di), "%v, answered %v", c.err, c.answered)
	}
	// The RPC's deadline passed: grpc-go made the DeadlineExceeded, though
	// headers or messages came first (a stream that stalled).
	dead := balancer.DoneInfo{Err: status.Error(codes.DeadlineExceeded, "x"), BytesReceived: true}
	assert.Equal(t, adapter.DeadlineNoAnswer, p.resultOf(late, dead))
	assert.Equal(t, adapter.Failed, withDeadline.resultOf(late, dead))
}

// Every status code a server sends is read as package adapter reads it
// (adapter.GRPCResult, the reading of the HTTP status the code stands
// for): DefaultFailureCodes are exactly the codes it counts as failed, and
// the picker reads each answered code as it does, so that an instance
// counts the same over grpcctx as over an HTTP adapter.
func TestPicker_ResultAgreesWithAdapter(t *testing.T) {
	p := &picker{failures: defaultFailureCodes}
	for c := uint32(0); c <= 20; c++ {
		want := adapter.GRPCResult(c)
		err := status.Error(codes.Code(c), "x")
		if c == 0 {
			err = nil
		}
		assert.Equal(t, want == adapter.Failed, defaultFailureCodes.failed(err), "%v (HTTP %d): a failure code", codes.Code(c), adapter.GRPCStatusHTTP(c))
		assert.Equal(t, want, p.resultOf(context.Background(), balancer.DoneInfo{Err: err, BytesReceived: true}), "%v (HTTP %d), answered", codes.Code(c), adapter.GRPCStatusHTTP(c))
	}
	custom := newFailureSet([]codes.Code{codes.Unavailable})
	assert.False(t, custom.failed(status.Error(codes.Code(17), "x")), "a code beyond gRPC's counts as Unknown does, which is not in the set")
}

// pushback reads grpc-retry-pushback-ms as the pause a server asked for;
// anything else, hostile values included, is no pause.
func TestPushback(t *testing.T) {
	for _, c := range []struct {
		md   metadata.MD
		want time.Duration
	}{
		{nil, 0},
		{metadata.Pairs("grpc-retry-pushback-ms", "1500"), 1500 * time.Millisecond},
		{metadata.Pairs("grpc-retry-pushback-ms", "0"), 0},
		{metadata.Pairs("grpc-retry-pushback-ms", "-1"), 0},
		{metadata.Pairs("grpc-retry-pushback-ms", "1e3"), 0},
		{metadata.Pairs("grpc-retry-pushback-ms", "99999999999999"), 0},
		{metadata.Pairs("grpc-retry-pushback-ms", "1", "grpc-retry-pushback-ms", "2"), 0},
	} {
		assert.Equal(t, c.want, pushback(c.md), "%v", c.md)
	}
}
