package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type otherKey struct{}

func TestWithValue_NewestWinsAndNamesStaySeparate(t *testing.T) {
	ctx := WithValue(context.Background(), "gray", "true")
	ctx = WithValue(ctx, "version", "v1")
	ctx = WithValue(ctx, "gray", "false")
	require.Equal(t, "false", ValueFrom(ctx, "gray"))
	require.Equal(t, "v1", ValueFrom(ctx, "version"))
	require.Equal(t, "", ValueFrom(ctx, "uid"))
	require.Equal(t, "", ValueFrom(context.Background(), "gray"))
	var none context.Context // nil: no panic
	require.Equal(t, "", ValueFrom(none, "gray"))
	require.Equal(t, "true", ValueFrom(WithValue(none, "gray", "true"), "gray"))
}

// A context derived from WithValue's, and one WithValue derives from, keep
// every value, deadline and cancellation of the others.
func TestWithValue_IsAContextLikeTheOthers(t *testing.T) {
	parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), otherKey{}, "x"))
	ctx := WithValue(parent, "gray", "true")
	derived, cancel := context.WithTimeout(WithValue(ctx, "version", "v2"), time.Minute)
	defer cancel()
	derived = context.WithValue(derived, otherKey{}, "y")

	require.Equal(t, "true", ValueFrom(derived, "gray"), "through a timeout and a plain value")
	require.Equal(t, "v2", ValueFrom(derived, "version"))
	require.Equal(t, "x", ctx.Value(otherKey{}), "other keys reach the parent")
	require.Equal(t, "y", derived.Value(otherKey{}))
	_, ok := derived.Deadline()
	require.True(t, ok)
	require.Contains(t, ctx.(interface{ String() string }).String(), "WithValue(graylb gray)")

	cause := errors.New("parent gone")
	cancelParent(cause)
	select {
	case <-derived.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the parent did not reach a context derived from WithValue's")
	}
	require.ErrorIs(t, derived.Err(), context.Canceled)
	require.ErrorIs(t, context.Cause(derived), cause)
	require.ErrorIs(t, ctx.Err(), context.Canceled)
}

// Values set in a context that also carries a ContextHandler's source
// route the same whether the context is WithValue's own or derived.
func TestWithValue_RoutesThroughDerivedContexts(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1), inst("svc", 2, "gray", "true")})
	gray := WithValue(context.Background(), "gray", "true")
	derived, cancel := context.WithCancel(gray)
	defer cancel()
	for _, ctx := range []context.Context{gray, derived, context.WithValue(gray, otherKey{}, 1)} {
		got, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		require.Equal(t, 2, got.Port)
	}
	got, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.Equal(t, 1, got.Port)
}

// A Request built outside the LoadBalancer (a filter's own test) still
// reads WithValue's values.
func TestRequest_ZeroValueReadsTheContext(t *testing.T) {
	r := Request{Context: WithValue(context.Background(), "zone", "eu")}
	require.Equal(t, "eu", r.Value("zone"))
	require.Equal(t, "", r.Value("gray"))
}

func TestSameString(t *testing.T) {
	a := "version"
	b := strings.Clone(a)
	for _, c := range []struct {
		x, y string
		want bool
	}{{a, a, true}, {a, b, true}, {a, "versio", false}, {a, "versioN", false}, {"", "", true}, {"", a, false}} {
		require.Equal(t, c.want, sameString(c.x, c.y), "%q %q", c.x, c.y)
	}
}

func BenchmarkWithValue(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sinkCtx = WithValue(context.Background(), "gray", "true")
	}
}

var sinkCtx context.Context

// overrideStage is a filter's stage that changes the request's context
// and asks the stage it wraps, which must see the new context's values.
type overrideStage struct{ Stage }

func (s overrideStage) Choose(r Request) int {
	r.Context = WithValue(r.Context, "version", "v2")
	return s.Stage.Choose(r)
}

type overrideFilter struct{ inner *VersionFilter }

func (f overrideFilter) Order() int               { return 100 }
func (f overrideFilter) Build(in BuildInfo) Stage { return overrideStage{f.inner.Build(in)} }

func TestRequest_ValueFollowsAContextTheFilterReplaces(t *testing.T) {
	list := []Instance{inst("svc", 1, "version", "v1"), inst("svc", 2, "version", "v2")}
	lb, _ := newTestLB(t, list, WithFilters(overrideFilter{NewVersionFilter()}))
	for i := 0; i < 4; i++ {
		got, err := lb.Pick(WithValue(context.Background(), "version", "v1"), "svc")
		require.NoError(t, err)
		require.Equal(t, 2, got.Port, "the wrapped version filter saw the request's own context")
	}
	r := Request{Context: WithValue(context.Background(), "zone", "eu")}
	r.init(r.Context, "svc", nil, valuesIn(r.Context))
	r.Context = WithValue(r.Context, "zone", "us")
	require.Equal(t, "us", r.Value("zone"))
}
