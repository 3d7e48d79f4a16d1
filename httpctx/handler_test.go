package httpctx

import (
	"context"
	"net/http"
	"net/textproto"
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

func TestCanonicalKeys(t *testing.T) {
	for h, want := range map[string]bool{"Gray": true, "X-Lane": true, "X-Api-Key": true, "gray": false, "X-lane": false, "GRAY": false, "": true, "1-A": true} {
		assert.Equal(t, want, canonicalKeys(http.Header{h: {"v"}}), "%q", h)
		if want {
			assert.Equal(t, textproto.CanonicalMIMEHeaderKey(h), h, "%q is canonical", h)
		}
	}
	joined := canonicalized(http.Header{"Gray": {"true"}, "gray": {"false"}, "uid": {"u"}})
	assert.ElementsMatch(t, []string{"true", "false"}, joined["Gray"], "two spellings' values joined")
	assert.Equal(t, []string{"u"}, joined["Uid"])
	assert.Len(t, joined, 2)
}
