package grpcctx

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
)

// The key of the outgoing metadata is caught, so a decided call without
// metadata of its own takes the one-allocation path.
func TestDecided_KeyIsCaught(t *testing.T) {
	require.NotNil(t, outgoingKey)
	assert.Nil(t, context.Background().Value(outgoingKey))
	assert.NotNil(t, metadata.AppendToOutgoingContext(context.Background()).Value(outgoingKey))
}

// A decidedCtx reads as the call's context with the decision's metadata:
// the call's other values, deadline and cancellation are the call's, and
// what is appended later adds to the decision without changing the shared
// metadata.
func TestDecided_ReadsAsTheCallsContext(t *testing.T) {
	d := newDecisions("Gray", "Version")
	type k struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), k{}, "v"), time.Minute)
	p := decided{gray: "true", lane: "v2"}
	ctx := d.with(parent, p)
	require.IsType(t, &decidedCtx{}, ctx)
	assert.Equal(t, "v", ctx.Value(k{}))
	dl, ok := ctx.Deadline()
	pdl, _ := parent.Deadline()
	assert.True(t, ok)
	assert.Equal(t, pdl, dl)
	md, _ := metadata.FromOutgoingContext(ctx)
	assert.Equal(t, metadata.MD{"gray": {"true"}, "version": {"v2"}}, md)

	more := metadata.AppendToOutgoingContext(ctx, "gray", "x", "other", "1")
	md, _ = metadata.FromOutgoingContext(more)
	assert.Equal(t, metadata.MD{"gray": {"true", "x"}, "version": {"v2"}, "other": {"1"}}, md)
	again, _ := metadata.FromOutgoingContext(d.with(context.Background(), p))
	assert.Equal(t, metadata.MD{"gray": {"true"}, "version": {"v2"}}, again, "the shared metadata is unchanged")

	cancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the decided context was not cancelled with the call's")
	}
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
}

// A call with outgoing metadata of its own keeps it: the decision is
// appended.
func TestDecided_CallsOwnMetadataIsKept(t *testing.T) {
	d := newDecisions("gray", "version")
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-a", "1")
	out := d.with(ctx, decided{gray: "false"})
	_, decided := out.(*decidedCtx)
	assert.False(t, decided)
	md, _ := metadata.FromOutgoingContext(out)
	assert.Equal(t, metadata.MD{"x-a": {"1"}, "gray": {"false"}}, md)
}

// Decisions are made once each, concurrently, and no more than maxDecided
// are kept: past it each call appends its pairs.
func TestDecided_ConcurrentAndBounded(t *testing.T) {
	d := newDecisions("gray", "version")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2 * maxDecided {
				lane := "v" + strconv.Itoa((i+g)%(2*maxDecided))
				ctx := d.with(context.Background(), decided{lane: lane})
				assert.Equal(t, []string{lane}, metadata.ValueFromOutgoingContext(ctx, "version"))
			}
		}()
	}
	wg.Wait()
	assert.Len(t, *d.made.Load(), maxDecided)
	first := d.of(decided{gray: "true"})
	assert.Nil(t, first, "past the bound nothing more is kept")
}
