package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callReader stands for an adapter's reader of a call's keys (a zero-size
// comparable type, as httpctx's and grpcctx's Handler are): it reads the
// fake headers of the test's context and counts how often it is asked.
type callReader struct{}

var callReads atomic.Int64

func (callReader) Value(ctx context.Context, name string) string {
	callReads.Add(1)
	h, _ := ctx.Value(headerKey{}).(map[string]string)
	return h[name]
}

// newPlainLB is a LoadBalancer over svc (one prod and one gray instance)
// and empty (known, no instance), with opts alone.
func newPlainLB(t *testing.T, opts ...Option) *LoadBalancer {
	t.Helper()
	reg := NewRegistry()
	require.NoError(t, reg.Register(inst("svc", 1)))
	require.NoError(t, reg.Register(inst("svc", 2, "gray", "true")))
	require.NoError(t, reg.Register(inst("empty", 1)))
	require.NoError(t, reg.Deregister("empty", "127.0.0.1:1"))
	lb, err := New(reg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb
}

// A LoadBalancer with no ContextHandler routes by the keys an adapter's
// reader gives it; without a reader (routing, Pick) it does not see them.
func TestRouteWith_ReadsTheCallsKeysWithoutAContextHandler(t *testing.T) {
	lb := newPlainLB(t)
	ctx := withHeaders(context.Background(), "gray", "true")
	r, err := lb.routeWith(ctx, "svc", callReader{})
	require.NoError(t, err)
	assert.Equal(t, Gray, r.Kind)
	assert.Equal(t, FromKey, r.Source)
	assert.Equal(t, 2, r.Next().Port)

	r, err = lb.routeReq(ctx, "svc")
	require.NoError(t, err)
	assert.Equal(t, Prod, r.Kind, "routing reads through the ContextHandlers alone")

	router, err := lb.newRouter("svc", []Instance{inst("svc", 1), inst("svc", 2, "gray", "true")}, nil)
	require.NoError(t, err)
	r, err = router.routeWith(ctx, callReader{})
	require.NoError(t, err)
	assert.Equal(t, Gray, r.Kind, "Router.RouteWith")
	r, err = router.routeReq(ctx)
	require.NoError(t, err)
	assert.Equal(t, Prod, r.Kind, "Router.Route")

	// A service with no instance: the error names the kind the reader gave.
	_, err = lb.routeWith(ctx, "empty", callReader{})
	var nie *NoInstanceError
	require.ErrorAs(t, err, &nie)
	assert.Equal(t, Gray, nie.Kind)
}

// The reader comes first, then the ContextHandlers, then WithValue; each
// source is asked only when the ones before it have nothing.
func TestRouteWith_Precedence(t *testing.T) {
	handlerOnly := ContextHandlerFunc(func(ctx context.Context, name string) string {
		if name == "gray" {
			return "false"
		}
		return ""
	})
	lb := newPlainLB(t, WithContextHandler(handlerOnly))
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		want    Kind
		wantSrc KindSource
	}{
		{"reader before handler", withHeaders(context.Background(), "gray", "true"), Gray, FromKey},
		{"handler when the reader has nothing", context.Background(), Prod, FromKey},
		{"handler before WithValue", WithValue(context.Background(), "gray", "true"), Prod, FromKey},
	} {
		r, err := lb.routeWith(tc.ctx, "svc", callReader{})
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, r.Kind, tc.name)
		assert.Equal(t, tc.wantSrc, r.Source, tc.name)
	}
	noHandler := newPlainLB(t)
	r, err := noHandler.routeWith(WithValue(context.Background(), "gray", "true"), "svc", callReader{})
	require.NoError(t, err)
	assert.Equal(t, Gray, r.Kind, "WithValue when the call carries nothing")
	assert.Equal(t, FromContext, r.Source)
}

// A reader equal to a registered ContextHandler is asked once per key;
// handlers of other types still are; a handler of a type that cannot be
// compared (a func) is asked, never compared, and nothing panics.
func TestRouteWith_AsksAnEqualHandlerOnce(t *testing.T) {
	var funcReads atomic.Int64
	fn := ContextHandlerFunc(func(ctx context.Context, name string) string { funcReads.Add(1); return "" })
	for _, tc := range []struct {
		name      string
		opts      []Option
		reads     int64 // callReader reads per route of a request with no keys
		funcReads int64
	}{
		{"no handler", nil, 1, 0},
		{"the reader registered", []Option{WithContextHandler(callReader{})}, 1, 0},
		{"the reader registered twice", []Option{WithContextHandler(callReader{}, callReader{})}, 2, 0},
		{"the reader and a func", []Option{WithContextHandler(fn, callReader{})}, 1, 1},
		{"a func only", []Option{WithContextHandler(fn)}, 1, 1},
	} {
		lb := newPlainLB(t, tc.opts...)
		callReads.Store(0)
		funcReads.Store(0)
		_, err := lb.routeWith(context.Background(), "svc", callReader{})
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.reads, callReads.Load(), "%s: reader reads", tc.name)
		assert.Equal(t, tc.funcReads, funcReads.Load(), "%s: func reads", tc.name)
		// A func as the reader, with a func registered: compared with
		// nothing, asked, no panic.
		require.NotPanics(t, func() { _, _ = lb.routeWith(context.Background(), "svc", fn) }, tc.name)
	}
}

// decide reads the call's keys through the reader: a kind the call
// carries decides (FromKey); a gray user's id the call carries decides; a
// lane is not given to a call that carries a version.
func TestDecide_ReadsTheCallsKeys(t *testing.T) {
	lb := newPlainLB(t, WithRules(Rules{GrayUsers: []string{"alice"},
		Matches: []Match{{Key: "x-lane", Exact: "feat", Version: "feat"}}}))
	d := lb.decide(withHeaders(context.Background(), "uid", "alice"), callReader{})
	assert.Equal(t, Decision{Kind: Gray, Source: FromRules}, d, "a gray user's id read from the call decides")
	d = lb.decide(withHeaders(context.Background(), "uid", "alice"), nil)
	assert.Equal(t, Decision{Kind: Prod, Source: FromDefault}, d, "without a reader the call's uid is not seen")
	d = lb.decide(withHeaders(context.Background(), "gray", "TRUE"), callReader{})
	assert.Equal(t, Decision{Kind: Gray, Source: FromKey}, d)

	assert.Equal(t, "feat", lb.decide(withHeaders(context.Background(), "x-lane", "feat"), callReader{}).Lane)
	assert.Equal(t, "", lb.decide(withHeaders(context.Background(), "x-lane", "feat"), nil).Lane, "without a reader")
	assert.Equal(t, "", lb.decide(withHeaders(context.Background(), "x-lane", "feat", "version", "v1"), callReader{}).Lane,
		"a call that carries a version keeps it")
}

// An adapter's reader costs the route no allocation.
func TestRouteWith_NoAllocation(t *testing.T) {
	lb := newPlainLB(t, WithContextHandler(testHandler))
	ctx := withHeaders(context.Background(), "gray", "true")
	_, err := lb.routeWith(ctx, "svc", callReader{})
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(500, func() { _, _ = lb.routeWith(ctx, "svc", callReader{}) }))
	router, err := lb.newRouter("svc", []Instance{inst("svc", 1), inst("svc", 2, "gray", "true")}, nil)
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(500, func() { _, _ = router.routeWith(ctx, callReader{}) }))
}
