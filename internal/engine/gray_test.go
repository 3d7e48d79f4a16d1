package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oracle is the gray rule written as plainly as possible.
func oracle(reqGray bool, list []Instance) []Instance {
	var gray, prod []Instance
	for _, in := range list {
		if KindOf(in.Metadata["gray"]) == Gray {
			gray = append(gray, in)
		} else {
			prod = append(prod, in)
		}
	}
	if !reqGray {
		return prod
	}
	if len(gray) > 0 {
		return gray
	}
	return list
}

var (
	requestValues = []struct {
		name string
		v    string
		set  bool
	}{
		{"absent", "", false}, {"empty", "", true}, {"true", "true", true}, {"TRUE", "TRUE", true},
		{"True", "True", true}, {"false", "false", true}, {"FALSE", "FALSE", true}, {"junk", "junk", true},
	}
	instanceMixes = []struct {
		name string
		list []Instance
	}{
		{"all prod", mix("svc", []string{"gray", "false"}, []string{"gray", "FALSE"}, nil)},
		{"all gray", mix("svc", []string{"gray", "true"}, []string{"gray", "TRUE"})},
		{"mixed", mix("svc", []string{"gray", "true"}, []string{"gray", "false"}, []string{"gray", "false"})},
		{"mixed with junk and missing", mix("svc", []string{"gray", "True"}, []string{"gray", "junk"}, nil, []string{"gray", ""}, []string{"gray", " true"})},
		{"empty", nil},
	}
)

func TestGrayFilter_DecisionTable(t *testing.T) {
	sources := []struct {
		name string
		ctx  func(v string, set bool) context.Context
		opts []Option
	}{
		{"header", func(v string, set bool) context.Context {
			if !set {
				return context.Background()
			}
			return withHeaders(context.Background(), "gray", v)
		}, nil},
		{"context value", func(v string, set bool) context.Context {
			if !set {
				return context.Background()
			}
			return WithValue(context.Background(), "gray", v)
		}, nil},
	}
	for _, src := range sources {
		for _, rv := range requestValues {
			for _, m := range instanceMixes {
				t.Run(src.name+"/"+rv.name+"/"+m.name, func(t *testing.T) {
					lb, _ := newTestLB(t, m.list, src.opts...)
					want := oracle(IsGray(rv.v), m.list)
					got, err := pickedSet(t, lb, src.ctx(rv.v, rv.set), "svc", 3*len(m.list)+1)
					if len(want) == 0 {
						require.ErrorIs(t, err, ErrNoInstance)
						var nie *NoInstanceError
						require.True(t, errors.As(err, &nie))
						assert.Equal(t, "svc", nie.Service)
						assert.Equal(t, KindOf(rv.v), nie.Kind)
						assert.Contains(t, err.Error(), `"svc"`)
						assert.Contains(t, err.Error(), KindOf(rv.v).String())
						return
					}
					require.NoError(t, err)
					assert.Equal(t, addrs(want), got)
				})
			}
		}
	}
	// Third source: the caller's own gray flag, used when nothing else is set.
	for _, self := range []bool{false, true} {
		for _, m := range instanceMixes {
			t.Run("self/"+Kind(map[bool]Kind{false: Prod, true: Gray}[self]).String()+"/"+m.name, func(t *testing.T) {
				lb, _ := newTestLB(t, m.list, WithSelfGray(self))
				want := oracle(self, m.list)
				got, err := pickedSet(t, lb, context.Background(), "svc", 3*len(m.list)+1)
				if len(want) == 0 {
					require.ErrorIs(t, err, ErrNoInstance)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, addrs(want), got)
			})
		}
	}
}

func TestGrayFilter_SourceOrder(t *testing.T) {
	list := mix("svc", []string{"gray", "true"}, []string{"gray", "false"})
	grayAddr, prodAddr := []string{list[0].Addr()}, []string{list[1].Addr()}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		self bool
		want []string
	}{
		{"header beats context", WithValue(withHeaders(context.Background(), "gray", "false"), "gray", "true"), false, prodAddr},
		{"empty header falls to context", WithValue(withHeaders(context.Background(), "gray", ""), "gray", "true"), false, grayAddr},
		{"junk header stops the search", WithValue(withHeaders(context.Background(), "gray", "junk"), "gray", "true"), true, prodAddr},
		{"context beats self", WithValue(context.Background(), "gray", "false"), true, prodAddr},
		{"self when nothing set", context.Background(), true, grayAddr},
		{"default prod", context.Background(), false, prodAddr},
		{"newest context value wins", WithValue(WithValue(context.Background(), "gray", "true"), "gray", "false"), false, prodAddr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, _ := newTestLB(t, list, WithSelfGray(tc.self))
			got, err := pickedSet(t, lb, tc.ctx, "svc", 10)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestGrayFilter_GrayRequestFallsBackWhenNoGray(t *testing.T) {
	var outcomes []Outcome
	obs := func(_ string, _ Kind, o Outcome) { outcomes = append(outcomes, o) }
	list := mix("svc", nil, []string{"gray", "false"})
	lb, reg := newTestLB(t, append(list, inst("svc", 9100, "gray", "true")), WithObserver(obs))
	gctx := withHeaders(context.Background(), "gray", "true")
	in, err := lb.Pick(gctx, "svc")
	require.NoError(t, err)
	assert.Equal(t, 9100, in.Port)
	require.NoError(t, reg.Deregister("svc", "127.0.0.1:9100"))
	got, err := pickedSet(t, lb, gctx, "svc", 6)
	require.NoError(t, err)
	assert.Equal(t, addrs(list), got)
	assert.Equal(t, Selected, outcomes[0])
	assert.Equal(t, FellBack, outcomes[len(outcomes)-1])
}

func TestGrayFilter_CustomHeaderAndKey(t *testing.T) {
	list := []Instance{inst("svc", 1, "gray-tag", "true"), inst("svc", 2, "gray", "true")}
	lb, _ := newTestLB(t, list, WithGrayHeader("gray-tag"), WithGrayKey("gray-tag"))
	got, err := pickedSet(t, lb, withHeaders(context.Background(), "gray-tag", "TRUE"), "svc", 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1"}, got)
	got, err = pickedSet(t, lb, withHeaders(context.Background(), "gray", "true"), "svc", 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:2"}, got, "the default header name is not read")
}
