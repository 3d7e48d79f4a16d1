package httpctx

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHandler_OutgoingBeforeIncoming(t *testing.T) {
	ctx := admitted(http.Header{"Gray": {"true"}, "Uid": {"in"}})
	ctx = WithOutgoing(ctx, http.Header{"Gray": {"false"}})
	h := Handler()
	assert.Equal(t, "false", h.Value(ctx, "gray"))
	assert.Equal(t, "in", h.Value(ctx, "uid"))
	assert.Equal(t, "", h.Value(ctx, "version"))
	assert.Equal(t, "", h.Value(context.Background(), "gray"))
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.Value(ctx, "gray") }))
}
