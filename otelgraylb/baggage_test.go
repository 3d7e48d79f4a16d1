package otelgraylb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/graylb/graylb/otelgraylb"
	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/baggage"
)

// Members reads the routing members with OpenTelemetry's parser, in any
// letter case, skipping implausible values; a header it cannot parse
// carries nothing.
func TestBaggage_Members(t *testing.T) {
	b := otelgraylb.Baggage()
	assert.Equal(t, "baggage", b.Header())
	names := []string{"gray", "uid", "version"}
	for _, tc := range []struct {
		v    string
		want []string
	}{
		{"gray=true,uid=alice", []string{"true", "alice", ""}},
		{" GRAY = true ; p=1 , other=x", []string{"true", "", ""}},
		{"uid=a%20b", nil},   // a space is no routing value
		{"gray=true,,", nil}, // OpenTelemetry refuses it
		{"=true", nil},
		{strings.Repeat("x", 9000), nil},
		{"", []string{"", "", ""}},
	} {
		got := b.Members(tc.v, names)
		if tc.want == nil {
			assert.True(t, len(got) == 0 || strings.Join(got, "") == "", "%q: %q", tc.v, got)
			continue
		}
		assert.Equal(t, tc.want, got, "%q", tc.v)
	}
}

// Without drops the members drop names, in any letter case, and keeps the
// others with their properties; an unparsable header goes whole.
func TestBaggage_Without(t *testing.T) {
	b := otelgraylb.Baggage()
	drop := func(k string) bool { return strings.EqualFold(k, "gray") || strings.EqualFold(k, "uid") }
	assert.Equal(t, "other=x;p=1", b.Without("Gray=true,uid=alice,other=x;p=1", drop))
	assert.Equal(t, "", b.Without("gray=true", drop))
	assert.Equal(t, "", b.Without("gray=true,,", drop))
	assert.Equal(t, "other=x", b.Without("other=x", drop))
}

// With sets members beside the others, replacing one of the same name in
// any letter case, and skips implausible values.
func TestBaggage_With(t *testing.T) {
	b := otelgraylb.Baggage()
	got, err := baggage.Parse(b.With("GRAY=false,other=x", "gray", "true", "uid", "a b"))
	assert.NoError(t, err)
	assert.Equal(t, "true", got.Member("gray").Value())
	assert.Equal(t, "", got.Member("GRAY").Value())
	assert.Equal(t, "x", got.Member("other").Value())
	assert.Equal(t, "", got.Member("uid").Value())
	assert.Equal(t, "gray=true", b.With("not baggage,,", "gray", "true"))
}

// ContextWithout drops the members from the context's own baggage.
func TestBaggage_ContextWithout(t *testing.T) {
	b := otelgraylb.Baggage()
	in, _ := baggage.Parse("gray=true,other=x")
	ctx := baggage.ContextWithBaggage(context.Background(), in)
	out := b.ContextWithout(ctx, func(k string) bool { return k == "gray" })
	assert.Equal(t, "other=x", baggage.FromContext(out).String())
	plain := context.Background()
	assert.Equal(t, plain, b.ContextWithout(plain, func(string) bool { return true }))
}

func FuzzBaggage(f *testing.F) {
	f.Add("gray=true,uid=alice;p=1")
	b := otelgraylb.Baggage()
	f.Fuzz(func(t *testing.T, v string) {
		ms := b.Members(v, []string{"gray", "uid"})
		for _, m := range ms {
			if m != "" && !otelgraylb.ValidValue(m) {
				t.Fatalf("%q routed %q", v, m)
			}
		}
		w := b.Without(v, func(k string) bool { return strings.EqualFold(k, "gray") })
		if ms := b.Members(w, []string{"gray"}); len(ms) == 1 && ms[0] != "" {
			t.Fatalf("%q: gray left in %q", v, w)
		}
		_ = b.With(v, "gray", "true")
	})
}
