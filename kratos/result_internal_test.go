package graylbkratos

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb/adapter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resultOf maps a call's error to its Result: what adapter.ResultOf
// reads, then adapter.HTTPResult of the code Kratos maps the error to; a
// gRPC status reads as adapter.GRPCResult reads its code.
func TestResultOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want adapter.Result
	}{
		{nil, adapter.OK},
		{context.Canceled, adapter.Cancelled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), adapter.DeadlineNoAnswer},
		{kerrors.New(499, "CLIENT_CLOSED", "x"), adapter.Cancelled},
		{status.Error(codes.Canceled, "x"), adapter.Cancelled},
		{kerrors.GatewayTimeout("TIMEOUT", "x"), adapter.DeadlineAnswered},
		{status.Error(codes.DeadlineExceeded, "x"), adapter.DeadlineAnswered},
		{kerrors.New(501, "UNIMPLEMENTED", "x"), adapter.OK},
		{kerrors.ServiceUnavailable("DOWN", "x"), adapter.Failed},
		{kerrors.InternalServer("BUG", "x"), adapter.Failed},
		{status.Error(codes.Unavailable, "x"), adapter.Failed},
		{errors.New("connection refused"), adapter.Failed},
		{kerrors.NotFound("NOPE", "x"), adapter.OK},
		{kerrors.BadRequest("BAD", "x"), adapter.OK},
		{kerrors.New(429, "LIMITED", "x"), adapter.Overloaded},
		{status.Error(codes.ResourceExhausted, "x"), adapter.Overloaded},
		{status.Error(codes.Unimplemented, "x"), adapter.OK},
		{status.Error(codes.NotFound, "x"), adapter.OK},
		{status.Error(codes.Unknown, "x"), adapter.Failed},
		{status.Error(codes.DataLoss, "x"), adapter.Failed},
		{kerrors.New(502, "BAD_GATEWAY", "x"), adapter.Failed},
	} {
		if got := resultOf(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
		if st, ok := status.FromError(c.err); ok && c.err != nil {
			if got := adapter.GRPCResult(uint32(st.Code())); got != c.want {
				t.Errorf("%v: adapter.GRPCResult reads %v, Kratos %v", c.err, got, c.want)
			}
		}
	}
}

// resultOfDone reads a gRPC DeadlineExceeded of which no byte came, or
// that came past the call's deadline, as no answer (grpc-go made it at the
// caller's deadline), and one the node sent as an answer; a Kratos error
// (an HTTP call's) as resultOf does.
func TestResultOfDone(t *testing.T) {
	for _, c := range []struct {
		di   selector.DoneInfo
		want adapter.Result
	}{
		{selector.DoneInfo{Err: status.Error(codes.DeadlineExceeded, "x")}, adapter.DeadlineNoAnswer},
		{selector.DoneInfo{Err: status.Error(codes.DeadlineExceeded, "x"), BytesReceived: true}, adapter.DeadlineAnswered},
		{selector.DoneInfo{Err: kerrors.GatewayTimeout("TIMEOUT", "x")}, adapter.DeadlineAnswered},
		{selector.DoneInfo{Err: fmt.Errorf("x: %w", context.DeadlineExceeded)}, adapter.DeadlineNoAnswer},
		{selector.DoneInfo{Err: status.Error(codes.Unavailable, "x")}, adapter.Failed},
		{selector.DoneInfo{Err: status.Error(codes.Unimplemented, "x"), BytesReceived: true}, adapter.OK},
		{selector.DoneInfo{}, adapter.OK},
	} {
		if got := resultOfDone(context.Background(), c.di); got != c.want {
			t.Errorf("%v (bytes received %v): %v, want %v", c.di.Err, c.di.BytesReceived, got, c.want)
		}
	}
	// The call's deadline passed: grpc-go made the DeadlineExceeded,
	// though something came first (a stream that stalled).
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	if got := resultOfDone(late, selector.DoneInfo{Err: status.Error(codes.DeadlineExceeded, "x"), BytesReceived: true}); got != adapter.DeadlineNoAnswer {
		t.Errorf("a DeadlineExceeded past the call's deadline: %v, want %v", got, adapter.DeadlineNoAnswer)
	}
	if got := resultOfDone(late, selector.DoneInfo{Err: kerrors.GatewayTimeout("TIMEOUT", "x")}); got != adapter.DeadlineAnswered {
		t.Errorf("an HTTP 504 past the call's deadline: %v, want %v", got, adapter.DeadlineAnswered)
	}
}

// An HTTP call whose body Client awaits ends with what its body gave: a
// body read and decoded is the headers' answer; one that failed (a
// decode error, a reset) counts against the node, one its caller's
// deadline cut is no answer in time, a cancelled one says nothing; an
// error status, whose body Kratos read before done, is read as its
// status.
func TestBodyRead(t *testing.T) {
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	bg := context.Background()
	for _, c := range []struct {
		name    string
		ctx     context.Context
		headers error // done's
		body    error // Kratos' client's, after the body
		want    adapter.Result
	}{
		{"read", bg, nil, nil, adapter.OK},
		{"decode error", bg, nil, errors.New("json: cannot unmarshal"), adapter.Failed},
		{"reset", bg, nil, errors.New("read: connection reset by peer"), adapter.Failed},
		{"deadline", late, nil, errors.New("read: i/o timeout"), adapter.DeadlineNoAnswer},
		{"cancelled", bg, nil, fmt.Errorf("read: %w", context.Canceled), adapter.Cancelled},
		{"404", bg, kerrors.NotFound("NOPE", "x"), kerrors.NotFound("NOPE", "x"), adapter.OK},
		{"503", bg, kerrors.ServiceUnavailable("DOWN", "x"), kerrors.ServiceUnavailable("DOWN", "x"), adapter.Failed},
		{"504 past the deadline", late, kerrors.GatewayTimeout("TIMEOUT", "x"), kerrors.GatewayTimeout("TIMEOUT", "x"), adapter.DeadlineAnswered},
	} {
		d := &callDone{node: awaitingBody{}}
		d.done(c.ctx, selector.DoneInfo{Err: c.headers})
		if r := d.bodyResult(c.ctx, c.body); r != c.want {
			t.Errorf("%s: %v, want %v", c.name, r, c.want)
		}
	}
	if r := (&callDone{node: awaitingBody{}}).bodyResult(bg, context.Canceled); r != adapter.Cancelled {
		t.Errorf("done never ran: %v, want %v", r, adapter.Cancelled)
	}
}
