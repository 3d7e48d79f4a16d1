package adaptertest

import (
	"context"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
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
	t.Run("CallsTracked", func(t *testing.T) { callsTracked(t, &d) })
	t.Run("Ejection", func(t *testing.T) { ejection(t, &d) })
	t.Run("Answers", func(t *testing.T) { answers(t, &d) })
	t.Run("CallEnds", func(t *testing.T) { callEnds(t, &d) })
	t.Run("AbruptDeath", func(t *testing.T) { abruptDeath(t, &d) })
	t.Run("ShadowMark", func(t *testing.T) { shadowMark(t, &d) })
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
		{trusted("GRAY", "TRUE"), "gray-1", map[string]string{"gray": "true"}}, // the canonical value, whatever the spelling
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
