package grpcctx

import (
	"context"
	"testing"

	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/metadata"
)

func TestHandler(t *testing.T) {
	h := Handler()
	in := metadata.NewIncomingContext(context.Background(), metadata.Pairs("gray", "true", "uid", "u1"))
	assert.Equal(t, "", h.Value(in, "gray"), "raw incoming metadata counts only once the server interceptors keep it")
	kept := newAdmission(nil, nil).keep(in)
	assert.Equal(t, "true", h.Value(kept, "gray"))
	assert.Equal(t, "true", h.Value(kept, "GRAY"))
	out := metadata.AppendToOutgoingContext(kept, "gray", "false")
	assert.Equal(t, "false", h.Value(out, "gray"), "outgoing before incoming")
	assert.Equal(t, "u1", h.Value(out, "uid"))
	assert.Equal(t, "", h.Value(kept, "version"))
	assert.Equal(t, "", h.Value(context.Background(), "gray"))
	octx := metadata.NewOutgoingContext(kept, metadata.Pairs("gray", "TRUE"))
	assert.Equal(t, "TRUE", h.Value(octx, "gray"))
	appended := metadata.AppendToOutgoingContext(octx, "uid", "u2", "version", "v1")
	assert.Equal(t, "u2", h.Value(appended, "uid"), "appended pairs count")
	assert.Equal(t, "v1", h.Value(appended, "Version"))
	assert.Equal(t, "TRUE", h.Value(appended, "gray"), "the given metadata before appended pairs")
	// grpc-go's ValueFromOutgoingContext copies the value slice: one
	// allocation when the call has outgoing metadata, none otherwise.
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { h.Value(appended, "version") }), 1.0)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.Value(kept, "uid") }))
}

// At a trust boundary the program's user function sees the call as
// admitted so far: the caller's routing keys gone from its incoming
// metadata, and the call marked untrusted.
func TestUserSeesTheStrippedCall(t *testing.T) {
	var sawUID []string
	var sawUntrusted bool
	a := newAdmission(nil, []Option{
		WithTrusted(func(context.Context) bool { return false }),
		WithUser(func(ctx context.Context) string {
			md, _ := metadata.FromIncomingContext(ctx)
			sawUID, sawUntrusted = md.Get("uid"), adapter.UntrustedCaller(ctx)
			return "alice"
		}),
	})
	ctx := a.keep(metadata.NewIncomingContext(context.Background(), metadata.Pairs("uid", "attacker", "gray", "true", "x-other", "1")))
	assert.Empty(t, sawUID, "the caller's uid, seen by the user function")
	assert.True(t, sawUntrusted)
	md, _ := metadata.FromIncomingContext(ctx)
	assert.Equal(t, metadata.MD{"uid": {"alice"}, "x-other": {"1"}}, md)
	assert.Equal(t, "alice", Handler().Value(ctx, "uid"))
	assert.Equal(t, "", Handler().Value(ctx, "gray"))
}
