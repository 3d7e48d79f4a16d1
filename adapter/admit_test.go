package adapter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapCarrier is a Carrier over a map of names as the caller sent them.
type mapCarrier map[string]string

func (m mapCarrier) Get(name string) string {
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func (m mapCarrier) Set(name, value string) { m.Delete(name); m[name] = value }

func (m mapCarrier) Delete(name string) {
	for k := range m {
		if strings.EqualFold(k, name) {
			delete(m, k)
		}
	}
}

func (m mapCarrier) Keys() []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// What one server side admits is what every reader sees: a hand Pick with
// no ContextHandler, a client adapter's Kept, and the trust mark.
func TestAdmitIsReadByPick(t *testing.T) {
	lb := newLB(t)
	adm := adapter.For(lb).Admitter("x-extra")
	ctx := adm.Admit(context.Background(), mapCarrier{"GRAY": "true", "Uid": "u1", "X-Extra": "e", "Other": "o"}, adapter.Admission{})
	in, err := lb.Pick(ctx, "svc")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2:80", in.Addr(), "a hand Pick reads the admitted gray key")
	kept := adapter.KeptFrom(ctx)
	got := map[string]string{}
	for i := 0; i < kept.Len(); i++ {
		n, v := kept.At(i)
		got[n] = v
		assert.Equal(t, []string{v}, kept.Values(i))
	}
	assert.Equal(t, map[string]string{"gray": "true", "uid": "u1", "x-extra": "e"}, got)
	assert.False(t, adapter.UntrustedCaller(ctx))

	// A key the call itself carries wins over the admitted one.
	in, err = lb.Pick(graylb.WithValue(ctx, "gray", "false"), "svc")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2:80", in.Addr(), "an admitted key ranks before a context value")
}

// An untrusted caller's routing keys (any letter case, match keys and
// extra names too) are deleted from its carrier and kept nowhere; the
// program's user id replaces the caller's.
func TestAdmitUntrusted(t *testing.T) {
	lb := newLB(t)
	require.NoError(t, lb.SetRules(graylb.Rules{Matches: []graylb.Match{{Key: "x-tenant", Exact: "beta", Gray: true}}}))
	adm := adapter.For(lb).Admitter("X-Extra")
	c := mapCarrier{"GRAY": "true", "gray": "true", "uid": "attacker", "X-Tenant": "beta", "x-extra": "1", "Other": "o"}
	var userSaw context.Context
	ctx := adm.Admit(context.Background(), c, adapter.Admission{Untrusted: true, User: func(ctx context.Context) string { userSaw = ctx; return "alice" }})
	require.NotNil(t, userSaw)
	assert.True(t, adapter.UntrustedCaller(userSaw), "the user id is asked with the caller marked untrusted")
	assert.Equal(t, mapCarrier{"uid": "alice", "Other": "o"}, c)
	assert.True(t, adapter.UntrustedCaller(ctx))
	kept := adapter.KeptFrom(ctx)
	require.Equal(t, 1, kept.Len())
	n, v := kept.At(0)
	assert.Equal(t, "uid=alice", n+"="+v)
	for i := 0; i < 20; i++ {
		in, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.1:80", in.Addr())
	}
	// An inner server side that trusts the call keeps it untrusted.
	ctx = adm.Admit(ctx, mapCarrier{"gray": "true"}, adapter.Admission{})
	assert.True(t, adapter.UntrustedCaller(ctx))
	assert.Equal(t, "", adapter.KeptFrom(ctx).Get("gray"))
}

// The canary draws once per request served: under a 50 % canary every call a
// request makes has the kind of its first, whichever reader asks.
func TestAdmitDecidesOnce(t *testing.T) {
	lb := newLB(t)
	require.NoError(t, lb.SetRules(graylb.Rules{CanaryPercent: 50}))
	b := adapter.For(lb)
	adm := b.Admitter()
	kinds := map[graylb.Kind]int{}
	for i := 0; i < 200; i++ {
		ctx := adm.Admit(context.Background(), mapCarrier{}, adapter.Admission{})
		first, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		for j := 0; j < 5; j++ {
			in, err := lb.Pick(ctx, "svc")
			require.NoError(t, err)
			require.Equal(t, first.Addr(), in.Addr(), "request %d, call %d", i, j)
			d := b.Decide(ctx, nil)
			require.Equal(t, d.Kind == graylb.Gray, first.Addr() == "10.0.0.2:80")
		}
		kinds[b.Decide(ctx, nil).Kind]++
	}
	assert.Greater(t, kinds[graylb.Gray], 50, "the canary still draws per request")
	assert.Greater(t, kinds[graylb.Prod], 50)
}

// A server side that admits nothing, under rules that decide nothing,
// leaves the context as it was.
func TestAdmitNothingKeepsContext(t *testing.T) {
	lb := newLB(t)
	ctx := context.Background()
	assert.Equal(t, ctx, adapter.For(lb).Admitter().Admit(ctx, mapCarrier{"Other": "x"}, adapter.Admission{}))
	assert.Equal(t, 0, adapter.KeptFrom(ctx).Len())
}

// The canary's draw for a request is its kind under every LoadBalancer
// that routes its calls, rules or none, and is written for the next hop;
// a rules change while it is served does not redraw it.
func TestAdmitDrawHoldsAcrossLoadBalancers(t *testing.T) {
	canary := newLB(t)
	require.NoError(t, canary.SetRules(graylb.Rules{CanaryPercent: 100}))
	plain := newLB(t)
	other := newLB(t)
	require.NoError(t, other.SetRules(graylb.Rules{GrayUsers: []string{"nobody"}}))
	ctx := adapter.For(canary).Admitter().Admit(context.Background(), mapCarrier{}, adapter.Admission{})
	in, err := canary.Pick(ctx, "svc")
	require.NoError(t, err)
	require.Equal(t, "10.0.0.2:80", in.Addr(), "the canary drew gray")
	for name, lb := range map[string]*graylb.LoadBalancer{"no rules": plain, "other rules": other} {
		in, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.2:80", in.Addr(), "%s: the request's draw", name)
		out := mapCarrier{}
		adapter.For(lb).Stamp(ctx, out, nil)
		assert.Equal(t, mapCarrier{"gray": "true"}, out, "%s: written for the next hop", name)
	}
	require.NoError(t, canary.SetRules(graylb.Rules{}))
	in, err = canary.Pick(ctx, "svc")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2:80", in.Addr(), "the canary at 0 mid-request: the request keeps its draw")
}

// A match rule one call's own key meets makes that call gray, and no
// other: only the canary's draw is kept for the request.
func TestAdmitPerCallMatchStaysPerCall(t *testing.T) {
	lb := newLB(t)
	require.NoError(t, lb.SetRules(graylb.Rules{CanaryPercent: 0.01, Matches: []graylb.Match{{Key: "x-api", Exact: "beta", Gray: true}}}))
	b := adapter.For(lb)
	ctx := b.Admitter().Admit(context.Background(), mapCarrier{"uid": "u-prod"}, adapter.Admission{}) // u-prod: outside the 0.01 %
	beta := graylb.ContextHandlerFunc(func(_ context.Context, name string) string {
		if name == "x-api" {
			return "beta"
		}
		return ""
	})
	for i, c := range []struct {
		call graylb.ContextHandler
		want graylb.Kind
	}{{nil, graylb.Prod}, {beta, graylb.Gray}, {nil, graylb.Prod}, {beta, graylb.Gray}} {
		r, err := b.Route(ctx, "svc", c.call)
		require.NoError(t, err)
		assert.Equal(t, c.want, r.Kind, "call %d", i)
	}
}

// A program that marks the caller untrusted after a trusting server side
// admitted its keys routes by none of them.
func TestWithUntrustedCallerDropsAdmittedKeys(t *testing.T) {
	lb := newLB(t)
	require.NoError(t, lb.SetRules(graylb.Rules{Matches: []graylb.Match{{Key: "x-tenant", Exact: "beta", Gray: true}}}))
	ctx := adapter.For(lb).Admitter().Admit(context.Background(), mapCarrier{"gray": "true", "x-tenant": "beta"}, adapter.Admission{})
	ctx = adapter.WithUntrustedCaller(ctx)
	assert.Equal(t, 0, adapter.KeptFrom(ctx).Len())
	for i := 0; i < 10; i++ {
		in, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.1:80", in.Addr())
	}
}

// A nil Carrier is a call that carries no key.
func TestAdmitNilCarrier(t *testing.T) {
	lb := newLB(t)
	adm := adapter.For(lb).Admitter()
	ctx := adm.Admit(context.Background(), nil, adapter.Admission{Untrusted: true, User: func(context.Context) string { return "alice" }})
	assert.True(t, adapter.UntrustedCaller(ctx))
	assert.Equal(t, 0, adapter.KeptFrom(ctx).Len(), "nothing to set the user on")
	var none context.Context // a caller that passed no context
	assert.Equal(t, context.Background(), adapter.For(nil).Admitter().Admit(none, nil, adapter.Admission{}))
}
