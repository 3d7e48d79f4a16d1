package adapter_test

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
)

// Stamp writes the decided kind in its canonical spelling whenever
// something decided it, the lane when the call has no version, and the
// admitted keys the call lacks; an untrusted caller's keys are deleted
// first and its kind is always written.
func TestStamp(t *testing.T) {
	lb := newLB(t, graylb.WithGrayHeader("x-gray"))
	b := adapter.For(lb)
	bg := context.Background()
	untrusted := adapter.WithUntrustedCaller(bg)
	admitted := b.Admitter().Admit(bg, mapCarrier{"uid": "u1", "X-Gray": "TRUE"}, adapter.Admission{})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		out  mapCarrier
		d    adapter.Decision
		want mapCarrier
	}{
		{"a key travels in its canonical spelling", bg, mapCarrier{"X-GRAY": "TRUE"}, adapter.Decision{Kind: graylb.Gray, Source: adapter.FromKey},
			mapCarrier{"x-gray": "true"}},
		{"junk is prod", bg, mapCarrier{"x-gray": "yes"}, adapter.Decision{Kind: graylb.Prod, Source: adapter.FromKey}, mapCarrier{"x-gray": "false"}},
		{"nobody classified it", bg, mapCarrier{}, adapter.Decision{Kind: graylb.Prod, Source: adapter.FromDefault}, mapCarrier{}},
		{"rules and a lane", bg, mapCarrier{}, adapter.Decision{Kind: graylb.Gray, Source: adapter.FromRules, Lane: "v2"},
			mapCarrier{"x-gray": "true", "version": "v2"}},
		{"the call's own version wins over a lane", bg, mapCarrier{"Version": "v9"}, adapter.Decision{Kind: graylb.Prod, Source: adapter.FromRules, Lane: "v2"},
			mapCarrier{"x-gray": "false", "Version": "v9"}},
		{"a context value", bg, mapCarrier{}, adapter.Decision{Kind: graylb.Gray, Source: adapter.FromContext}, mapCarrier{"x-gray": "true"}},
		{"an untrusted caller's keys go, its kind is written", untrusted, mapCarrier{"X-Gray": "true", "UID": "alice", "Other": "o"},
			adapter.Decision{Kind: graylb.Prod, Source: adapter.FromDefault}, mapCarrier{"x-gray": "false", "Other": "o"}},
		{"the admitted keys the call lacks, the kind canonical", admitted, mapCarrier{}, adapter.Decision{Kind: graylb.Gray, Source: adapter.FromKey},
			mapCarrier{"uid": "u1", "x-gray": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d
			b.Stamp(tc.ctx, tc.out, &d)
			assert.Equal(t, tc.want, tc.out)
		})
	}
}

// With no decision given, Stamp decides from the context and the call's
// own keys, after an untrusted caller's are deleted: a forged key a proxy
// copied routes nothing.
func TestStamp_Decides(t *testing.T) {
	lb := newLB(t, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"},
		Matches: []graylb.Match{{Key: "x-lane", Exact: "feat", Version: "feat"}}}))
	b := adapter.For(lb)
	bg := context.Background()
	for _, tc := range []struct {
		ctx       context.Context
		out, want mapCarrier
	}{
		{bg, mapCarrier{"Gray": "TRUE"}, mapCarrier{"gray": "true"}},
		{bg, mapCarrier{"uid": "alice"}, mapCarrier{"uid": "alice", "gray": "true"}},
		{bg, mapCarrier{"x-lane": "feat"}, mapCarrier{"x-lane": "feat", "gray": "false", "version": "feat"}},
		{graylb.WithValue(bg, "gray", "true"), mapCarrier{}, mapCarrier{"gray": "true"}},
		{adapter.WithUntrustedCaller(bg), mapCarrier{"gray": "true", "uid": "alice"}, mapCarrier{"gray": "false"}},
		{bg, mapCarrier{"uid": "bob"}, mapCarrier{"uid": "bob"}},
	} {
		b.Stamp(tc.ctx, tc.out, nil)
		assert.Equal(t, tc.want, tc.out)
	}
}

// Stamp writes what the routing decides: for every mix of rules, call
// keys, context values and trust, the kind it writes is the kind Route
// decides (the canary at 0 or 100, so that two decisions are one).
func TestStamp_AgreesWithRoute(t *testing.T) {
	rules := []graylb.Rules{
		{},
		{GrayUsers: []string{"alice"}},
		{CanaryPercent: 100},
		{Matches: []graylb.Match{{Key: "uid", Exact: "carol", Version: "v2", Gray: true}, {Key: "uid", Exact: "dave", Version: "v3"}}},
	}
	for ri, rl := range rules {
		lb := newLB(t, graylb.WithRules(rl))
		b := adapter.For(lb)
		for _, g := range []string{"", "true", "false", "junk", "TRUE"} {
			for _, u := range []string{"", "alice", "carol", "dave"} {
				for _, ctxGray := range []string{"", "true"} {
					for _, untrusted := range []bool{false, true} {
						ctx := context.Background()
						if ctxGray != "" {
							ctx = graylb.WithValue(ctx, "gray", ctxGray)
						}
						if untrusted {
							ctx = adapter.WithUntrustedCaller(ctx)
						}
						out := mapCarrier{}
						if g != "" {
							out["gray"] = g
						}
						if u != "" {
							out["uid"] = u
						}
						b.Stamp(ctx, out, nil)
						r, err := b.Route(ctx, "svc", readerOf(out))
						if err != nil {
							continue
						}
						want := map[graylb.Kind]string{graylb.Prod: "false", graylb.Gray: "true"}[r.Kind]
						if got := out.Get("gray"); got != "" || r.Source != adapter.FromDefault {
							assert.Equal(t, want, got, "rules %d gray=%q uid=%q ctx=%q untrusted=%v", ri, g, u, ctxGray, untrusted)
						}
					}
				}
			}
		}
	}
}

// readerOf reads a carrier's keys for Route.
func readerOf(c mapCarrier) graylb.ContextHandler {
	return graylb.ContextHandlerFunc(func(_ context.Context, name string) string { return c.Get(name) })
}
