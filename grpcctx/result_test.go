package grpcctx

import (
	"context"
	"fmt"
	"testing"

	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resultOf maps an RPC's end to its Result: what adapter.ResultOf reads,
// then the status code against the balancer config's failure codes.
func TestPicker_ResultOf(t *testing.T) {
	p := &picker{failures: defaultFailureCodes}
	withDeadline := &picker{failures: newFailureSet([]codes.Code{codes.Unavailable, codes.DeadlineExceeded})}
	for _, c := range []struct {
		p    *picker
		err  error
		want adapter.Result
	}{
		{p, nil, adapter.OK},
		{p, status.Error(codes.Canceled, "x"), adapter.Cancelled},
		{p, context.Canceled, adapter.Cancelled},
		{p, fmt.Errorf("x: %w", context.DeadlineExceeded), adapter.DeadlineNoAnswer},
		{p, status.Error(codes.DeadlineExceeded, "x"), adapter.DeadlineAnswered},
		{withDeadline, status.Error(codes.DeadlineExceeded, "x"), adapter.Failed},
		{p, status.Error(codes.Unavailable, "x"), adapter.Failed},
		{p, status.Error(codes.Internal, "x"), adapter.Failed},
		{withDeadline, status.Error(codes.Internal, "x"), adapter.OK},
		{p, status.Error(codes.NotFound, "x"), adapter.OK},
		{p, status.Error(codes.ResourceExhausted, "x"), adapter.OK},
	} {
		assert.Equal(t, c.want, c.p.resultOf(c.err), "%v", c.err)
	}
}
