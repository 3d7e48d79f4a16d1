package graylb

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsGray(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"true", true}, {"TRUE", true}, {"True", true}, {"tRuE", true},
		{"", false}, {"false", false}, {"FALSE", false}, {"yes", false}, {"1", false},
		{" true", false}, {"true ", false}, {"truee", false}, {"tru", false},
		{"\x54RUE", true}, {"t\x00ue", false}, {"TRU\xc5", false}, {"junk", false},
	} {
		assert.Equal(t, tc.want, IsGray(tc.in), "%q", tc.in)
	}
}

// oracle is DESIGN §2 written as plainly as possible.
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

func TestRules(t *testing.T) {
	list := []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2), inst("svc", 3)}
	gray, prod, all := []string{"127.0.0.1:1"}, []string{"127.0.0.1:2", "127.0.0.1:3"}, addrs(list)
	off := false
	bg := context.Background()
	g := withHeaders(bg, "gray", "true")
	for _, tc := range []struct {
		name  string
		rules Rules
		ctx   context.Context
		want  []string
	}{
		{"gray user", Rules{GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u1"), gray},
		{"gray user beats gray false", Rules{GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u1", "gray", "false"), gray},
		{"other user", Rules{GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u2"), prod},
		{"gray user from context", Rules{GrayUsers: []string{"u1"}}, WithValue(bg, "uid", "u1"), gray},
		{"gray address by host:port", Rules{GrayAddresses: []string{"127.0.0.1:2"}}, g, []string{"127.0.0.1:1", "127.0.0.1:2"}},
		{"gray address keeps prod from it", Rules{GrayAddresses: []string{"127.0.0.1:2"}}, bg, []string{"127.0.0.1:3"}},
		{"gray address by host", Rules{GrayAddresses: []string{"127.0.0.1"}}, bg, nil},
		{"disabled: gray request anywhere", Rules{Enabled: &off}, g, all},
		{"disabled: prod request anywhere", Rules{Enabled: &off}, bg, all},
		{"closed: gray goes to prod", Rules{Closed: true}, g, prod},
		{"closed beats disabled", Rules{Closed: true, Enabled: &off}, g, prod},
		{"closed beats gray user", Rules{Closed: true, GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u1"), prod},
		{"canary 100", Rules{CanaryPercent: 100}, bg, gray},
		{"canary 100 leaves explicit false", Rules{CanaryPercent: 100}, withHeaders(bg, "gray", "false"), prod},
		{"canary 0", Rules{CanaryPercent: 0}, bg, prod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, _ := newTestLB(t, list, WithRules(tc.rules))
			got, err := pickedSet(t, lb, tc.ctx, "svc", 10)
			if tc.want == nil {
				require.ErrorIs(t, err, ErrNoInstance)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRules_CanaryIsStickyAndProportional(t *testing.T) {
	list := []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2)}
	lb, _ := newTestLB(t, list, WithRules(Rules{CanaryPercent: 20}))
	grayUsers := 0
	for u := 0; u < 2000; u++ {
		ctx := withHeaders(context.Background(), "uid", "user-"+itoa(u))
		first, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			again, err := lb.Pick(ctx, "svc")
			require.NoError(t, err)
			require.Equal(t, first.Port, again.Port, "user %d moved side", u)
		}
		if first.Port == 1 {
			grayUsers++
		}
	}
	assert.InDelta(t, 400, grayUsers, 80, "about 20%% of 2000 users")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestParseRules(t *testing.T) {
	r, err := ParseRules([]byte(`{"enabled":false,"closed":true,"grayUsers":["a"],"grayAddresses":["10.0.0.1:80","host"],"canaryPercent":12.5}`))
	require.NoError(t, err)
	require.NotNil(t, r.Enabled)
	assert.False(t, *r.Enabled)
	assert.True(t, r.Closed)
	for _, bad := range []string{
		``, `{`, `[]`, `{"canaryPercent":101}`, `{"canaryPercent":-1}`, `{"grayUsers":[""]}`,
		`{"grayAddresses":["1.2.3.4:0"]}`, `{"grayAddresses":[":80"]}`, `{"grayAddresses":["a b"]}`,
		`{"unknown":1}`, `{} {}`, `{"enabled":"yes"}`,
	} {
		_, err := ParseRules([]byte(bad))
		assert.ErrorIs(t, err, ErrInvalidRules, "%s", bad)
	}
}

func TestSetRules_InvalidKeepsPrevious(t *testing.T) {
	list := []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2)}
	lb, _ := newTestLB(t, list, WithRules(Rules{Closed: true}))
	g := withHeaders(context.Background(), "gray", "true")
	in, err := lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port)
	require.ErrorIs(t, lb.SetRules(Rules{CanaryPercent: 200}), ErrInvalidRules)
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port, "closed is still in force")
	require.NoError(t, lb.SetRules(Rules{}))
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 1, in.Port)
}
