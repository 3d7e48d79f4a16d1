package adaptertest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Run runs the conformance suite against d's adapter, one subtest per
// part of the contract. Instances are named by kind: "prod-..." and
// "gray-..." (registered with the gray metadata); "edge" is a service of
// one prod instance whose handler calls the next service.
func Run(t *testing.T, d Driver) {
	t.Helper()
	if d.Serve == nil || d.Dial == nil {
		t.Fatal("adaptertest: the Driver needs Serve and Dial")
	}
	t.Run("KeyCase", func(t *testing.T) { keyCase(t, &d) })
	t.Run("NoOptions", func(t *testing.T) { noOptions(t, &d) })
	t.Run("RenamedKeys", func(t *testing.T) { renamedKeys(t, &d) })
	t.Run("MatchKeysAndLanes", func(t *testing.T) { matchKeysAndLanes(t, &d) })
	t.Run("TrustBoundary", func(t *testing.T) { trustBoundary(t, &d) })
	t.Run("CallObserver", func(t *testing.T) { callObserver(t, &d) })
	t.Run("Ejection", func(t *testing.T) { ejection(t, &d) })
	t.Run("AbruptDeath", func(t *testing.T) { abruptDeath(t, &d) })
	t.Run("Allocations", func(t *testing.T) { allocations(t, &d) })
}

// keyCase: key names are case-insensitive, and the gray value "true" is
// gray in any letter case while nothing else is (nothing is trimmed): on
// the call a client makes, on the incoming call a server admitted and
// passes on, in a graylb.WithValue the program set and in a match rule's
// key. An instance's gray metadata is read in any letter case too.
func keyCase(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	rules := graylb.WithRules(graylb.Rules{Matches: []graylb.Match{{Key: "X-Region", Exact: "hz", Gray: true}}})
	lb, elb := e.lb(rules), e.lb(rules)
	e.serve(lb, "svc", "prod-1", nil, ServerOptions{})
	e.serve(lb, "svc", "gray-1", map[string]string{"gray": "TRUE"}, ServerOptions{})
	e.serve(elb, "edge", "edge", nil, ServerOptions{Next: e.dial(elb, "svc")})
	svc, edge := e.dial(lb, "svc"), e.dial(lb, "edge")
	ready(t, svc, grayKeys, "gray-1")
	ready(t, svc, nil, "prod-1")
	ready(t, edge, grayKeys, "edge", "gray-1")
	ready(t, edge, nil, "edge", "prod-1")

	for _, c := range []struct {
		keys map[string]string
		gray bool
		hop  bool // the value reaches a server as sent (HTTP trims spaces)
	}{
		{map[string]string{"gray": "true"}, true, true},
		{map[string]string{"GRAY": "TRUE"}, true, true},
		{map[string]string{"Gray": "true"}, true, true},
		{map[string]string{"gRaY": "tRuE"}, true, true},
		{map[string]string{"x-region": "hz"}, true, true},
		{map[string]string{"X-REGION": "hz"}, true, true},
		{map[string]string{"gray": "false"}, false, true},
		{map[string]string{"GRAY": "FALSE"}, false, true},
		{map[string]string{"gray": "yes"}, false, true},
		{map[string]string{"gray": "1"}, false, true},
		{map[string]string{"gray": ""}, false, true},
		{map[string]string{"gray": " true"}, false, false},
		{map[string]string{"gray": "true "}, false, false},
		{nil, false, true},
	} {
		for i := 0; i < 2; i++ {
			a := answer(t, svc, c.keys)
			assert.Equal(t, c.gray, isGray(a.Instance), "%s: a call with %v was answered by %s", d.Name, c.keys, a.Instance)
			if !c.hop {
				continue
			}
			a = answer(t, edge, c.keys)
			if assert.NotNil(t, a.Next, "%s: the edge did not reach svc: %s", d.Name, a.NextErr) {
				assert.Equal(t, c.gray, isGray(a.Next.Instance), "%s: a call with %v through the edge reached %s", d.Name, c.keys, path(a))
				assert.Equal(t, c.gray, graylb.IsGray(a.Next.Key("gray")), "%s: a call with %v through the edge: the next hop received gray %q", d.Name, c.keys, a.Next.Keys["gray"])
			}
		}
	}
	for _, name := range []string{"gray", "GRAY", "Gray"} {
		ctx, cancel := context.WithTimeout(graylb.WithValue(context.Background(), name, "TRUE"), callTimeout)
		a, err := svc(ctx, nil)
		cancel()
		require.NoError(t, err)
		assert.True(t, isGray(a.Instance), "%s: a call with graylb.WithValue(%q, TRUE) was answered by %s", d.Name, name, a.Instance)
	}
}

// noOptions: a LoadBalancer made with no option at all (no
// ContextHandler) routes by the adapter's own transport: its client side
// reads its call's keys, its server side admits the incoming keys for the
// calls the handler makes, and rules set at run time (gray users) read the
// user key there too.
func noOptions(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	lb, elb := e.bare(), e.bare()
	e.serve(lb, "svc", "prod-1", nil, ServerOptions{})
	e.serve(lb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	e.serve(elb, "edge", "edge", nil, ServerOptions{Next: e.dial(elb, "svc")})
	svc, edge := e.dial(lb, "svc"), e.dial(lb, "edge")
	ready(t, svc, grayKeys, "gray-1")
	ready(t, edge, grayKeys, "edge", "gray-1")
	ready(t, svc, nil, "prod-1")
	ready(t, edge, nil, "edge", "prod-1")

	check := func(keys map[string]string, gray bool) {
		t.Helper()
		for i := 0; i < 2; i++ {
			a := answer(t, svc, keys)
			assert.Equal(t, gray, isGray(a.Instance), "%s: a call with %v was answered by %s", d.Name, keys, a.Instance)
			a = answer(t, edge, keys)
			if assert.NotNil(t, a.Next, "%s: the edge did not reach svc: %s", d.Name, a.NextErr) {
				assert.Equal(t, gray, isGray(a.Next.Instance), "%s: a call with %v through the edge reached %s", d.Name, keys, path(a))
			}
		}
	}
	check(grayKeys, true)
	check(map[string]string{"gray": "false"}, false)
	check(nil, false)
	for _, l := range []*graylb.LoadBalancer{lb, elb} {
		require.NoError(t, l.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	}
	check(map[string]string{"uid": "alice"}, true)
	check(map[string]string{"uid": "bob"}, false)
	a := answer(t, edge, map[string]string{"uid": "alice"})
	if assert.NotNil(t, a.Next, a.NextErr) {
		assert.Equal(t, "alice", a.Next.Key("uid"), "%s: the user key is passed on", d.Name)
		assert.Equal(t, "true", a.Next.Key("gray"), "%s: the kind a gray user decided is written for the next hop", d.Name)
	}
}

// renamedKeys: the keys are the LoadBalancer's (graylb.WithGrayHeader,
// WithGrayKey, WithUserHeader, a VersionFilter's WithVersionHeader): the
// renamed ones route and are passed on, the default names mean nothing,
// and a kind a rule decided is written under the renamed gray key.
func renamedKeys(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	opts := []graylb.Option{
		graylb.WithGrayHeader("x-gray-tag"), graylb.WithGrayKey("gray-tag"), graylb.WithUserHeader("x-user-id"),
		graylb.WithFilters(filter.Version(filter.WithVersionHeader("x-ver"))),
		graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}),
	}
	lb, elb := e.lb(opts...), e.lb(opts...)
	e.serve(lb, "svc", "prod-old", map[string]string{"gray": "true"}, ServerOptions{}) // gray by the default key only: prod
	e.serve(lb, "svc", "prod-v1", map[string]string{"version": "v1"}, ServerOptions{})
	e.serve(lb, "svc", "prod-v2", map[string]string{"version": "v2"}, ServerOptions{})
	e.serve(lb, "svc", "gray-1", map[string]string{"gray-tag": "true"}, ServerOptions{})
	e.serve(elb, "edge", "edge", nil, ServerOptions{Next: e.dial(elb, "svc")})
	svc, edge := e.dial(lb, "svc"), e.dial(lb, "edge")
	tag, v1, v2 := map[string]string{"x-gray-tag": "true"}, map[string]string{"x-ver": "v1"}, map[string]string{"x-ver": "v2"}
	for _, c := range []Client{svc, edge} {
		ready(t, c, tag, "gray-1")
		ready(t, c, v1, "prod-v1")
		ready(t, c, v2, "prod-v2")
		ready(t, c, nil, "prod-old")
	}

	for _, c := range []struct {
		keys map[string]string
		want string
	}{
		{tag, "gray-1"},
		{map[string]string{"X-Gray-Tag": "TRUE"}, "gray-1"},
		{grayKeys, "prod-old"}, // no version: the unversioned prod instance
		{map[string]string{"x-user-id": "alice"}, "gray-1"},
		{map[string]string{"uid": "alice"}, "prod-old"},
		{v1, "prod-v1"},
		{v2, "prod-v2"},
		{map[string]string{"X-Ver": "v2"}, "prod-v2"},
		{map[string]string{"version": "v2"}, "prod-old"},
	} {
		for i := 0; i < 2; i++ {
			a := answer(t, svc, c.keys)
			assert.Equal(t, c.want, a.Instance, "%s: a call with %v", d.Name, c.keys)
			a = answer(t, edge, c.keys)
			if assert.NotNil(t, a.Next, "%s: the edge did not reach svc: %s", d.Name, a.NextErr) {
				assert.Equal(t, c.want, a.Next.Instance, "%s: a call with %v through the edge", d.Name, c.keys)
				assert.False(t, a.Next.Has("gray"), "%s: a call with %v through the edge: the next hop received the default gray key %v", d.Name, c.keys, a.Next.Keys["gray"])
			}
		}
	}
	a := answer(t, edge, v2)
	if assert.NotNil(t, a.Next, a.NextErr) {
		assert.Equal(t, "v2", a.Next.Key("x-ver"), "%s: the renamed version key is passed on", d.Name)
	}
	a = answer(t, edge, map[string]string{"x-user-id": "alice"})
	if assert.NotNil(t, a.Next, a.NextErr) {
		assert.Equal(t, "alice", a.Next.Key("x-user-id"), "%s: the renamed user key is passed on", d.Name)
		assert.Equal(t, "true", a.Next.Key("x-gray-tag"), "%s: the kind a gray user decided is written under the renamed gray key", d.Name)
	}
}

// matchKeysAndLanes: match rules (docs/rules.md) make a request gray or
// give it a lane by any key, in any letter case, only when nobody chose
// its side ("gray: false" opts out; a version the request carries wins
// over the lane); a server side passes the match keys on, and the first
// hop writes what it decided — the kind under the gray key, the lane
// under the version key — so the next hop routes the same way.
func matchKeysAndLanes(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	opts := []graylb.Option{graylb.WithFilters(filter.Version()), graylb.WithRules(graylb.Rules{Matches: []graylb.Match{
		{Key: "x-region", Exact: "hz", Gray: true},
		{Key: "X-Lane", Exact: "feat-42", Version: "feat-42"},
		{Key: "x-tenant", Prefix: "beta-", Gray: true, Version: "v2"},
	}})}
	lb, elb := e.lb(opts...), e.lb(opts...)
	e.serve(lb, "svc", "prod-1", nil, ServerOptions{})
	e.serve(lb, "svc", "prod-lane", map[string]string{"version": "feat-42"}, ServerOptions{})
	e.serve(lb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	e.serve(lb, "svc", "gray-v2", map[string]string{"gray": "true", "version": "v2"}, ServerOptions{})
	e.serve(elb, "edge", "edge", nil, ServerOptions{Next: e.dial(elb, "svc")})
	svc, edge := e.dial(lb, "svc"), e.dial(lb, "edge")
	region, lane, tenant := map[string]string{"x-region": "hz"}, map[string]string{"x-lane": "feat-42"}, map[string]string{"x-tenant": "beta-7"}
	for _, c := range []Client{svc, edge} {
		ready(t, c, region, "gray-1")
		ready(t, c, lane, "prod-lane")
		ready(t, c, tenant, "gray-v2")
		ready(t, c, nil, "prod-1")
	}

	for _, c := range []struct {
		keys map[string]string
		want string
	}{
		{region, "gray-1"},
		{map[string]string{"X-REGION": "hz"}, "gray-1"},
		{map[string]string{"x-region": "sh"}, "prod-1"},
		{map[string]string{"x-region": "hz", "gray": "false"}, "prod-1"},
		{lane, "prod-lane"},
		{map[string]string{"X-Lane": "feat-42"}, "prod-lane"},
		{map[string]string{"x-lane": "feat-42", "version": "v9"}, "prod-1"}, // the request's own version wins: none has it
		{tenant, "gray-v2"},
		{nil, "prod-1"},
	} {
		for i := 0; i < 2; i++ {
			a := answer(t, svc, c.keys)
			assert.Equal(t, c.want, a.Instance, "%s: a call with %v", d.Name, c.keys)
			a = answer(t, edge, c.keys)
			if assert.NotNil(t, a.Next, "%s: the edge did not reach svc: %s", d.Name, a.NextErr) {
				assert.Equal(t, c.want, a.Next.Instance, "%s: a call with %v through the edge", d.Name, c.keys)
			}
		}
	}
	for _, c := range []struct {
		keys          map[string]string
		gray, version string
	}{
		{region, "true", ""},
		{lane, "false", "feat-42"},
		{tenant, "true", "v2"},
	} {
		a := answer(t, edge, c.keys)
		if !assert.NotNil(t, a.Next, a.NextErr) {
			continue
		}
		for k, v := range c.keys {
			assert.Equal(t, v, a.Next.Key(k), "%s: the match key %s is passed on", d.Name, k)
		}
		assert.Equal(t, c.gray, a.Next.Key("gray"), "%s: a call with %v: the decided kind is written for the next hop", d.Name, c.keys)
		assert.Equal(t, c.version, a.Next.Key("version"), "%s: a call with %v: the lane is written for the next hop", d.Name, c.keys)
	}
}

// trustBoundary: at a server that is a trust boundary, an untrusted
// caller's routing keys (gray, user, version, the keys the match rules in
// force name, the names the server propagates), in any letter case and
// repeated, never route the calls its handler makes and are never passed
// on: the next hop receives none of them, and under the gray key only the
// kind the edge settled ("false"). A trusted caller's keys route and
// travel; the program's user id (ServerOptions.User) replaces whatever
// user the caller sent, trusted or not.
func trustBoundary(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	opts := []graylb.Option{graylb.WithFilters(filter.Version()), graylb.WithRules(graylb.Rules{
		GrayUsers: []string{"alice"},
		Matches:   []graylb.Match{{Key: "x-region", Exact: "hz", Gray: true}, {Key: "x-lane", Exact: "feat-42", Version: "feat-42"}},
	})}
	lb, elb := e.lb(opts...), e.lb(opts...)
	e.serve(lb, "svc", "prod-1", nil, ServerOptions{})
	e.serve(lb, "svc", "prod-v2", map[string]string{"version": "v2"}, ServerOptions{})
	e.serve(lb, "svc", "prod-lane", map[string]string{"version": "feat-42"}, ServerOptions{})
	e.serve(lb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	e.serve(elb, "edge", "edge", nil, ServerOptions{
		Next:       e.dial(elb, "svc"),
		Trusted:    func(get func(string) string) bool { return get("x-internal") == "yes" },
		User:       func(get func(string) string) string { return get("x-auth-user") },
		Propagated: []string{"x-tenant-id"},
	})
	edge := e.dial(e.lb(), "edge") // a caller without the rules: what reaches the edge is what it sent
	trusted := func(kv ...string) map[string]string {
		m := map[string]string{"x-internal": "yes"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	ready(t, edge, trusted("gray", "true"), "edge", "gray-1")
	ready(t, edge, trusted("version", "v2"), "edge", "prod-v2")
	ready(t, edge, trusted("x-lane", "feat-42"), "edge", "prod-lane")
	ready(t, edge, nil, "edge", "prod-1")

	routing := []string{"gray", "uid", "version", "x-region", "x-lane", "x-tenant-id"}
	for _, forged := range []map[string]string{
		{"gray": "true"}, {"GRAY": "TRUE"}, {"Gray": "true", "gray": "true", "GRAY": "True"},
		{"uid": "alice"}, {"UID": "alice"},
		{"version": "v2"}, {"Version": "v2"},
		{"x-region": "hz"}, {"X-REGION": "hz"},
		{"x-lane": "feat-42"}, {"X-Lane": "feat-42"},
		{"x-tenant-id": "t-1"}, {"X-Tenant-Id": "t-1"},
		{"gray": "true", "uid": "alice", "version": "v2", "x-region": "hz", "x-lane": "feat-42", "x-internal": "no"},
	} {
		a := answer(t, edge, forged)
		if !assert.NotNil(t, a.Next, "%s: the edge did not reach svc: %s", d.Name, a.NextErr) {
			continue
		}
		assert.Equal(t, "prod-1", a.Next.Instance, "%s: an untrusted caller's %v routed the edge's call", d.Name, forged)
		assert.Equal(t, []string{"false"}, a.Next.Keys["gray"], "%s: an untrusted caller's %v: the next hop's gray key", d.Name, forged)
		for _, k := range routing[1:] {
			assert.False(t, a.Next.Has(k), "%s: an untrusted caller's %v: %s=%v was passed on", d.Name, forged, k, a.Next.Keys[k])
		}
	}

	for _, c := range []struct {
		keys map[string]string
		want string
		got  map[string]string // keys the next hop receives
	}{
		{trusted("gray", "true"), "gray-1", map[string]string{"gray": "true"}},
		{trusted("GRAY", "TRUE"), "gray-1", map[string]string{"gray": "TRUE"}},
		{trusted("version", "v2"), "prod-v2", map[string]string{"version": "v2"}},
		{trusted("x-region", "hz"), "gray-1", map[string]string{"x-region": "hz", "gray": "true"}},
		{trusted("x-lane", "feat-42"), "prod-lane", map[string]string{"x-lane": "feat-42", "version": "feat-42"}},
		{trusted("x-tenant-id", "t-1"), "prod-1", map[string]string{"x-tenant-id": "t-1"}},
		{trusted("uid", "alice"), "prod-1", nil}, // the program's user id (none) replaces it
		{trusted("x-auth-user", "alice"), "gray-1", map[string]string{"uid": "alice", "gray": "true"}},
		{map[string]string{"x-auth-user": "alice"}, "gray-1", map[string]string{"uid": "alice", "gray": "true"}},
		{map[string]string{"x-auth-user": "bob", "uid": "alice"}, "prod-1", map[string]string{"uid": "bob", "gray": "false"}},
	} {
		a := answer(t, edge, c.keys)
		if !assert.NotNil(t, a.Next, "%s: the edge did not reach svc: %s", d.Name, a.NextErr) {
			continue
		}
		assert.Equal(t, c.want, a.Next.Instance, "%s: a call with %v through the edge", d.Name, c.keys)
		for k, v := range c.got {
			assert.Equal(t, v, a.Next.Key(k), "%s: a call with %v: the next hop's %s", d.Name, c.keys, k)
		}
		if _, ok := c.got["uid"]; !ok {
			assert.False(t, a.Next.Has("uid"), "%s: a call with %v: uid=%v was passed on", d.Name, c.keys, a.Next.Keys["uid"])
		}
	}
}

// callObserver: the LoadBalancer's CallObserver (graylb.WithCallObserver)
// is told of every call the client makes, under every policy, once each,
// with the instance that served it and that instance's kind (a gray call
// that fell back to prod is prod); a call answered with a server error or
// past its caller's deadline is told as failed; a cancelled one is not
// told.
func callObserver(t *testing.T, d *Driver) {
	for _, p := range []struct {
		name   string
		policy policy.Policy
	}{
		{"RoundRobin", policy.RoundRobin()},
		{"StrictRoundRobin", policy.StrictRoundRobin()},
		{"WeightedRoundRobin", policy.WeightedRoundRobin()},
		{"Random", policy.Random()},
		{"P2C", policy.P2C()},
	} {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, d)
			var obs observer
			var fail, hang atomic.Bool
			lb, slb := e.lb(graylb.WithPolicy(p.policy), graylb.WithCallObserver(obs.observe)), e.lb()
			ins := []*instance{
				e.serve(slb, "svc", "prod-1", nil, ServerOptions{}),
				e.serve(slb, "svc", "prod-2", nil, ServerOptions{}),
				e.serve(slb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{}),
				e.serve(slb, "solo", "prod-solo", nil, ServerOptions{}),
				e.serve(slb, "failing", "gray-failing", map[string]string{"gray": "true"}, ServerOptions{Fail: &fail}),
				e.serve(slb, "hanging", "gray-hanging", map[string]string{"gray": "true"}, ServerOptions{Hang: &hang}),
			}
			svc, solo, failing, hanging := e.dial(lb, "svc"), e.dial(lb, "solo"), e.dial(lb, "failing"), e.dial(lb, "hanging")
			ready(t, svc, nil, "prod-1", "prod-2")
			ready(t, svc, grayKeys, "gray-1")
			ready(t, solo, grayKeys, "prod-solo")
			ready(t, failing, grayKeys, "gray-failing")
			ready(t, hanging, grayKeys, "gray-hanging")
			fail.Store(true)
			hang.Store(true)

			obs.reset()
			want := map[string]int{}
			for i := 0; i < 6; i++ {
				for _, c := range []struct {
					c    Client
					keys map[string]string
				}{{svc, grayKeys}, {svc, nil}, {solo, grayKeys}} {
					a := answer(t, c.c, c.keys)
					want[addrOf(ins, a.Instance)+" "+kindOf(a.Instance)+" ok"]++
				}
			}
			obs.wait(t, 18)
			assert.Equal(t, want, obs.seen(), "%s under %s: the calls answered", d.Name, p.name)

			obs.reset()
			for i := 0; i < 2; i++ {
				a, err := call(failing, grayKeys)
				require.Error(t, err, "%s: a failing instance answered %+v", d.Name, a)
			}
			obs.wait(t, 2)
			assert.Equal(t, map[string]int{addrOf(ins, "gray-failing") + " gray error": 2}, obs.seen(),
				"%s under %s: the calls answered with a server error", d.Name, p.name)

			obs.reset()
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			a, err := hanging(ctx, grayKeys)
			cancel()
			require.Error(t, err, "%s: a hanging instance answered %+v", d.Name, a)
			obs.wait(t, 1)
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			a, err = hanging(ctx, grayKeys)
			require.Error(t, err, "%s: a hanging instance answered %+v", d.Name, a)
			time.Sleep(50 * time.Millisecond) // a cancelled call wrongly told would be by now
			assert.Equal(t, map[string]int{addrOf(ins, "gray-hanging") + " gray error": 1}, obs.seen(),
				"%s under %s: a call past its deadline is told as failed, a cancelled one is not told", d.Name, p.name)
		})
	}
}

// ejection: with outlier detection (graylb.WithOutlierDetection), an
// instance that answers server errors is ejected after a few of them in a
// row: its kind's calls go to the rest of that kind, a gray call whose
// every gray instance is ejected falls back to prod, and prod calls never
// reach gray nor fail meanwhile.
func ejection(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	const failures = 3
	var mu sync.Mutex
	var ejected []string
	lb, slb := e.lb(graylb.WithOutlierDetection(graylb.OutlierConfig{
		ConsecutiveFailures: failures, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		OnEjection: func(ej graylb.Ejection) {
			if ej.For > 0 {
				mu.Lock()
				ejected = append(ejected, ej.Addr)
				mu.Unlock()
			}
		},
	})), e.lb()
	var grayFails, prodFails atomic.Bool
	p1 := e.serve(slb, "svc", "prod-1", nil, ServerOptions{Fail: &prodFails})
	e.serve(slb, "svc", "prod-2", nil, ServerOptions{})
	g := e.serve(slb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{Fail: &grayFails})
	svc := e.dial(lb, "svc")
	ready(t, svc, grayKeys, "gray-1")
	ready(t, svc, nil, "prod-1", "prod-2")

	// until answers c with keys until an answer satisfies done, at most
	// 40 times; it returns how many failed.
	until := func(what string, keys map[string]string, done func(Answer) bool) int {
		t.Helper()
		failed := 0
		for i := 0; i < 40; i++ {
			a, err := call(svc, keys)
			if err != nil {
				failed++
				continue
			}
			if keys == nil {
				require.False(t, isGray(a.Instance), "%s: a prod call reached %s", d.Name, a.Instance)
			}
			if done(a) {
				return failed
			}
		}
		t.Fatalf("%s: %s: not within 40 calls", d.Name, what)
		return 0
	}
	grayFails.Store(true)
	n := until("a failing gray instance is ejected", grayKeys, func(a Answer) bool { return !isGray(a.Instance) })
	t.Logf("%s: %d gray calls failed before the gray instance was ejected", d.Name, n)
	assert.GreaterOrEqual(t, n, 1, "%s: the failing gray instance was never called", d.Name)
	assert.LessOrEqual(t, n, 2*failures, "%s: the gray instance was ejected late", d.Name)
	for i := 0; i < 6; i++ {
		a := answer(t, svc, grayKeys)
		assert.False(t, isGray(a.Instance), "%s: a gray call reached the ejected gray instance", d.Name)
		a = answer(t, svc, nil)
		assert.False(t, isGray(a.Instance), "%s: a prod call reached %s", d.Name, a.Instance)
	}

	prodFails.Store(true)
	n = 0
	for streak, i := 0, 0; streak < 6; i++ {
		require.Less(t, i, 40, "%s: a failing prod instance is not ejected within 40 calls", d.Name)
		a, err := call(svc, nil)
		switch {
		case err != nil:
			n, streak = n+1, 0
		case isGray(a.Instance):
			t.Fatalf("%s: a prod call reached %s", d.Name, a.Instance)
		default:
			streak++
		}
	}
	for i := 0; i < 6; i++ {
		a := answer(t, svc, nil)
		assert.Equal(t, "prod-2", a.Instance, "%s: a prod call after prod-1 was ejected", d.Name)
	}
	t.Logf("%s: %d prod calls failed before prod-1 was ejected", d.Name, n)
	assert.LessOrEqual(t, n, 2*failures, "%s: prod-1 was ejected late", d.Name)
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, ejected, g.inst.Addr(), "%s: OnEjection was told of the gray instance", d.Name)
	assert.Contains(t, ejected, p1.inst.Addr(), "%s: OnEjection was told of prod-1", d.Name)
}

// abruptDeath: an instance that dies abruptly (its listener closed, its
// connections reset, the registry still listing it) serves nobody: every
// idempotent call made after the death succeeds on another instance of its
// kind, and prod calls never reach gray.
func abruptDeath(t *testing.T, d *Driver) {
	if why, ok := d.Lacks[RetryOnDeath]; ok {
		t.Skipf("%s lacks %s: %s", d.Name, RetryOnDeath, why)
	}
	e := newEnv(t, d)
	lb, slb := e.lb(), e.lb()
	p1 := e.serve(slb, "svc", "prod-1", nil, ServerOptions{})
	e.serve(slb, "svc", "prod-2", nil, ServerOptions{})
	g1 := e.serve(slb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	e.serve(slb, "svc", "gray-2", map[string]string{"gray": "true"}, ServerOptions{})
	svc := e.dial(lb, "svc")
	ready(t, svc, grayKeys, "gray-1", "gray-2")
	ready(t, svc, nil, "prod-1", "prod-2")
	g1.l.Kill()
	p1.l.Kill()
	for i := 0; i < 20; i++ {
		a, err := call(svc, grayKeys)
		if assert.NoError(t, err, "%s: gray call %d after the death", d.Name, i) {
			assert.Equal(t, "gray-2", a.Instance, "%s: gray call %d after the death", d.Name, i)
		}
		a, err = call(svc, nil)
		if assert.NoError(t, err, "%s: prod call %d after the death", d.Name, i) {
			assert.Equal(t, "prod-2", a.Instance, "%s: prod call %d after the death", d.Name, i)
		}
	}
}

// allocations: a call through the adapter's client allocates at most
// Driver.MaxAllocs more than the same call to the same server through the
// transport without graylb (Driver.Direct).
func allocations(t *testing.T, d *Driver) {
	if d.Direct == nil {
		t.Skipf("%s declares no allocation bound (Driver.Direct is nil)", d.Name)
	}
	e := newEnv(t, d)
	lb := e.lb()
	e.serve(lb, "svc", "prod-1", nil, ServerOptions{})
	g := e.serve(lb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	svc, direct := e.dial(lb, "svc"), d.Direct(t, g.inst.Addr())
	ready(t, svc, grayKeys, "gray-1")
	ready(t, direct, grayKeys, "gray-1")
	var failed atomic.Value
	run := func(c Client) func() {
		return func() {
			a, err := call(c, grayKeys)
			if err == nil && a.Instance != "gray-1" {
				err = fmt.Errorf("answered by %s", a.Instance)
			}
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		}
	}
	for i := 0; i < 20; i++ { // connections, pools, caches
		run(svc)()
		run(direct)()
	}
	via := testing.AllocsPerRun(200, run(svc))
	base := testing.AllocsPerRun(200, run(direct))
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("%s: a call failed: %v", d.Name, err)
	}
	t.Logf("%s: %.1f allocations per call, %.1f without graylb: %.1f added (bound %.0f)", d.Name, via, base, via-base, d.MaxAllocs)
	assert.LessOrEqual(t, via-base, d.MaxAllocs, "%s: the allocations graylb adds to a call", d.Name)
}

// callTimeout bounds every call the suite makes that should be answered.
const callTimeout = 5 * time.Second

var grayKeys = map[string]string{"gray": "true"}

// env is one subtest's registry and driver.
type env struct {
	t   *testing.T
	d   *Driver
	reg *graylb.Registry
}

func newEnv(t *testing.T, d *Driver) *env { return &env{t: t, d: d, reg: graylb.NewRegistry()} }

// lb returns a LoadBalancer over the registry with the driver's options,
// then opts; closed when the test ends.
func (e *env) lb(opts ...graylb.Option) *graylb.LoadBalancer {
	return e.bare(append(append([]graylb.Option(nil), e.d.Options...), opts...)...)
}

// bare returns a LoadBalancer over the registry with opts alone.
func (e *env) bare(opts ...graylb.Option) *graylb.LoadBalancer {
	lb, err := graylb.New(e.reg, opts...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { lb.Close() })
	return lb
}

// instance is a running, registered instance.
type instance struct {
	id   string
	inst graylb.Instance
	l    *Listener
}

// serve starts the instance id of service, its server side over lb,
// and registers it with md.
func (e *env) serve(lb *graylb.LoadBalancer, service, id string, md map[string]string, o ServerOptions) *instance {
	e.t.Helper()
	l := Listen(e.t)
	o.ID = id
	e.d.Serve(e.t, lb, l, o)
	in := graylb.NewInstance(service, "127.0.0.1", l.Port(), md)
	require.NoError(e.t, e.reg.Register(in))
	return &instance{id: id, inst: in, l: l}
}

func (e *env) dial(lb *graylb.LoadBalancer, service string) Client {
	e.t.Helper()
	return e.d.Dial(e.t, e.reg, lb, service)
}

func call(c Client, keys map[string]string) (Answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return c(ctx, keys)
}

// answer makes a call that must succeed.
func answer(t *testing.T, c Client, keys map[string]string) Answer {
	t.Helper()
	a, err := call(c, keys)
	require.NoError(t, err, "a call with %v", keys)
	return a
}

// ready waits until every instance in ids answered (anywhere in a chain) a
// call with keys: gRPC connections turn ready one by one, and until an
// instance's does, no call reaches it.
func ready(t *testing.T, c Client, keys map[string]string, ids ...string) {
	t.Helper()
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for {
		a, err := call(c, keys)
		if err != nil {
			last = err.Error()
		} else {
			last = path(a)
			for n := &a; n != nil; n = n.Next {
				seen[n.Instance] = true
			}
		}
		missing := false
		for _, id := range ids {
			missing = missing || !seen[id]
		}
		if !missing {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls with %v did not reach %v within 10s; the last: %s", keys, ids, last)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// path returns the instances a chain of answers went through: edge>gray-1.
func path(a Answer) string {
	var b strings.Builder
	for n := &a; n != nil; n = n.Next {
		if n != &a {
			b.WriteString(">")
		}
		b.WriteString(n.Instance)
		if n.NextErr != "" {
			b.WriteString(">error: " + n.NextErr)
		}
	}
	return b.String()
}

func isGray(id string) bool { return strings.HasPrefix(id, "gray") }

func kindOf(id string) string {
	if isGray(id) {
		return graylb.Gray.String()
	}
	return graylb.Prod.String()
}

func addrOf(list []*instance, id string) string {
	for _, in := range list {
		if in.id == id {
			return in.inst.Addr()
		}
	}
	return "unknown instance " + id
}

// observer is a CallObserver that counts what it is told, by
// "addr kind ok|error".
type observer struct {
	mu sync.Mutex
	m  map[string]int
	n  int
}

func (o *observer) observe(_ string, inst graylb.Instance, kind graylb.Kind, ok bool, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]int{}
	}
	res := "ok"
	if !ok {
		res = "error"
	}
	o.m[inst.Addr()+" "+kind.String()+" "+res]++
	o.n++
}

func (o *observer) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m, o.n = map[string]int{}, 0
}

func (o *observer) seen() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := make(map[string]int, len(o.m))
	for k, v := range o.m {
		m[k] = v
	}
	return m
}

// wait waits until n calls were told (an adapter may tell a call after
// its caller had the answer), then a little longer for any extra one.
func (o *observer) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		o.mu.Lock()
		got := o.n
		o.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			keys := make([]string, 0)
			for k := range o.seen() {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Errorf("%d calls told to the CallObserver within 1s, not %d: %v", got, n, keys)
			return
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}
