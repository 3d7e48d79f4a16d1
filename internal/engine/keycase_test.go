package engine

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var keySpellings = []string{"X-Region", "x-region", "X-REGION", "x-Region"}

// Key names are case-insensitive however a key reaches the LoadBalancer:
// a value set with WithValue under any spelling of a match rule's key
// matches the rule, whichever spelling the rule uses.
func TestKeyNames_WithValueMatchesARuleInAnyCase(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2, "gray", "true")}
	for _, ruleKey := range keySpellings {
		lb, _ := newTestLB(t, list, WithRules(Rules{Matches: []Match{{Key: ruleKey, Exact: "hz", Gray: true}}}))
		for _, name := range keySpellings {
			ctx := WithValue(context.Background(), name, "hz")
			in, err := lb.Pick(ctx, "svc")
			require.NoError(t, err)
			assert.Equal(t, 2, in.Port, "rule key %q, WithValue name %q", ruleKey, name)
			d := lb.decide(ctx, nil)
			assert.Equal(t, Gray, d.Kind, "rule key %q, WithValue name %q", ruleKey, name)
			assert.Equal(t, FromRules, d.Source)
		}
	}
}

// The LoadBalancer's own keys (gray, user, version), default or
// configured, are read from WithValue in any letter case, on the plain
// path (no rule classifies requests) and the full one.
func TestKeyNames_OwnKeysFromWithValueInAnyCase(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2, "gray", "true"), inst("svc", 3, "version", "v2")}
	for _, tc := range []struct {
		name  string
		opts  []Option
		ctx   context.Context
		want  int
		rules *Rules
	}{
		{"gray key, plain path", nil, WithValue(context.Background(), "GRAY", "true"), 2, nil},
		{"gray key, rules path", nil, WithValue(context.Background(), "Gray", "true"), 2, &Rules{GrayUsers: []string{"nobody"}}},
		{"configured gray key, as configured", []Option{WithGrayHeader("Gray-Tag")}, WithValue(context.Background(), "Gray-Tag", "true"), 2, nil},
		{"configured gray key, lower case", []Option{WithGrayHeader("Gray-Tag")}, WithValue(context.Background(), "gray-tag", "true"), 2, nil},
		{"configured gray key, upper case", []Option{WithGrayHeader("gray-tag")}, WithValue(context.Background(), "GRAY-TAG", "true"), 2, nil},
		{"user key", nil, WithValue(context.Background(), "UID", "u1"), 2, &Rules{GrayUsers: []string{"u1"}}},
		{"configured user key", []Option{WithUserHeader("X-User")}, WithValue(context.Background(), "x-user", "u1"), 2, &Rules{GrayUsers: []string{"u1"}}},
		{"version key, plain path", []Option{WithFilters(NewVersionFilter())}, WithValue(context.Background(), "Version", "v2"), 3, nil},
		{"version key, rules path", []Option{WithFilters(NewVersionFilter())}, WithValue(context.Background(), "VERSION", "v2"), 3, &Rules{GrayUsers: []string{"nobody"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if tc.rules != nil {
				opts = append(opts, WithRules(*tc.rules))
			}
			lb, _ := newTestLB(t, list, opts...)
			for i := 0; i < 6; i++ {
				in, err := lb.Pick(tc.ctx, "svc")
				require.NoError(t, err)
				require.Equal(t, tc.want, in.Port)
			}
		})
	}
	lb, _ := newTestLB(t, list)
	assert.Equal(t, Decision{Kind: Gray, Source: FromContext}, lb.decide(WithValue(context.Background(), "GRAY", "true"), nil),
		"a context value decided the kind: the adapters write it on")
}

// ValueFrom reads a value under any spelling of the name it was set
// under; the newest of two spellings wins.
func TestKeyNames_ValueFromInAnyCase(t *testing.T) {
	ctx := WithValue(context.Background(), "X-Region", "hz")
	for _, name := range keySpellings {
		assert.Equal(t, "hz", ValueFrom(ctx, name), name)
	}
	ctx = WithValue(ctx, "x-REGION", "sh")
	assert.Equal(t, "sh", ValueFrom(ctx, "X-Region"), "the newest value wins, whatever its spelling")
}

// A ContextHandler that reads names case-insensitively (as headers and
// metadata are read) matches a rule in any letter case, the key set in
// any other.
func TestKeyNames_ContextHandlerInAnyCase(t *testing.T) {
	type hdrKey struct{}
	h := ContextHandlerFunc(func(ctx context.Context, name string) string {
		hdr, _ := ctx.Value(hdrKey{}).(http.Header)
		return hdr.Get(name)
	})
	list := []Instance{inst("svc", 1), inst("svc", 2, "gray", "true")}
	for _, ruleKey := range keySpellings {
		reg := NewRegistry()
		for _, in := range list {
			require.NoError(t, reg.Register(in))
		}
		lb, err := New(reg, WithContextHandler(h), WithRules(Rules{Matches: []Match{{Key: ruleKey, Exact: "hz", Gray: true}}}))
		require.NoError(t, err)
		for _, name := range keySpellings {
			hdr := http.Header{}
			hdr.Set(name, "hz")
			in, err := lb.Pick(context.WithValue(context.Background(), hdrKey{}, hdr), "svc")
			require.NoError(t, err)
			assert.Equal(t, 2, in.Port, "rule key %q, header %q", ruleKey, name)
		}
		lb.Close()
	}
}
