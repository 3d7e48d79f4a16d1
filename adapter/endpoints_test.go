package adapter_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conn is a transport handle of the tests: a name and whether it can carry
// a call now.
type conn struct {
	name  string
	ready bool
}

func ready(c conn) bool { return c.ready }

// endpoint is an endpoint of svc at 10.0.0.1:port.
func endpoint(port int, gray bool, c conn) adapter.Endpoint[conn] {
	return adapter.Endpoint[conn]{Instance: graylb.NewInstance("svc", "10.0.0.1", port, map[string]string{"gray": strconv.FormatBool(gray)}), Handle: c}
}

// picks routes n requests of kind gray over e and counts the handles
// picked, by name.
func picks(t *testing.T, e *adapter.Endpoints[conn], grayValue string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		rt, err := e.Route(context.Background(), gray(grayValue))
		require.NoError(t, err)
		h, call, ok := rt.Start()
		require.True(t, ok, "no usable endpoint")
		assert.Equal(t, h, rt.Handles()[indexOf(rt.Instances(), call.Instance)], "the handle is the picked instance's")
		call.End(adapter.OK)
		seen[h.name]++
	}
	return seen
}

func indexOf(list []graylb.Instance, in graylb.Instance) int {
	for i, x := range list {
		if x.Addr() == in.Addr() {
			return i
		}
	}
	return -1
}

// The gray rule decides among the endpoints, the LoadBalancer's policy
// picks among the usable candidates, and the pick yields their handles.
func TestEndpoints_RoutesOverTheUsableHandles(t *testing.T) {
	b := adapter.For(newLB(t))
	e, err := adapter.NewEndpoints(b, "svc", []adapter.Endpoint[conn]{
		endpoint(1, false, conn{"p1", true}),
		endpoint(2, false, conn{"p2", true}),
		endpoint(3, false, conn{"p3", false}), // connecting
		endpoint(4, true, conn{"g1", true}),
		endpoint(4, false, conn{"dup", true}), // the address of g1: left out
	}, ready)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"p1": 50, "p2": 50}, picks(t, e, "false", 100), "round robin over the usable prod endpoints")
	assert.Equal(t, map[string]int{"g1": 10}, picks(t, e, "true", 10))
	rt, err := e.Route(context.Background(), gray("false"))
	require.NoError(t, err)
	assert.Equal(t, graylb.Prod, rt.Kind)
	assert.Equal(t, "svc", rt.Service)
	assert.Equal(t, 3, rt.Len(), "an unusable endpoint stays a candidate")
	assert.ElementsMatch(t, []conn{{"p1", true}, {"p2", true}, {"p3", false}}, rt.Handles())
}

// A kind whose endpoints are all unusable is not sent to the other kind:
// its route has candidates and none is usable. A kind with no endpoint at
// all fails with ErrNoInstance, and a gray request falls back to prod only
// when no gray endpoint is listed.
func TestEndpoints_UnusableCandidatesDoNotFallBack(t *testing.T) {
	b := adapter.For(newLB(t))
	e, err := adapter.NewEndpoints(b, "svc", []adapter.Endpoint[conn]{
		endpoint(1, false, conn{"p1", true}),
		endpoint(2, true, conn{"g1", false}),
	}, ready)
	require.NoError(t, err)
	rt, err := e.Route(context.Background(), gray("true"))
	require.NoError(t, err)
	_, ok := rt.Next()
	assert.False(t, ok)
	h, call, ok := rt.Start()
	assert.False(t, ok)
	assert.Equal(t, conn{}, h)
	assert.Equal(t, adapter.Call{}, call)
	assert.Equal(t, []conn{{"g1", false}}, rt.Handles())

	e, err = adapter.NewEndpoints(b, "svc", []adapter.Endpoint[conn]{endpoint(2, true, conn{"g1", true})}, nil)
	require.NoError(t, err)
	rt, err = e.Route(context.Background(), gray("false"))
	assert.True(t, errors.Is(err, graylb.ErrNoInstance), "%v", err)
	assert.Equal(t, graylb.Prod, rt.Kind)
	assert.Zero(t, rt.Len())
	_, _, ok = rt.Start()
	assert.False(t, ok)

	e, err = adapter.NewEndpoints(b, "svc", []adapter.Endpoint[conn]{endpoint(1, false, conn{"p1", true})}, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"p1": 3}, picks(t, e, "true", 3), "gray falls back to prod when no gray endpoint is listed")

	_, err = adapter.NewEndpoints[conn](nil, "svc", nil, nil)
	assert.Error(t, err)
	_, err = adapter.NewEndpoints[conn](b, "", nil, nil)
	assert.True(t, errors.Is(err, graylb.ErrInvalidService), "%v", err)
}

// The LoadBalancer's policy applies as it is: weights over the usable
// endpoints.
func TestEndpoints_WeightedPolicy(t *testing.T) {
	b := adapter.For(newLB(t, graylb.WithPolicy(policy.WeightedRoundRobin())))
	heavy := endpoint(1, false, conn{"heavy", true})
	heavy.Instance.Weight = 3
	e, err := adapter.NewEndpoints(b, "svc", []adapter.Endpoint[conn]{heavy, endpoint(2, false, conn{"light", true}), endpoint(3, false, conn{"off", false})}, ready)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"heavy": 75, "light": 25}, picks(t, e, "false", 100))
}

// A Call started on an endpoint is one Call of the LoadBalancer's: it
// counts in flight and its result feeds the instance's Stats, which the
// LoadBalancer's own routes share; outlier detection ejects an endpoint
// whose calls fail.
func TestEndpoints_CallsFeedStatsAndEjection(t *testing.T) {
	// Stats are kept for the instances the LoadBalancer's Cache follows.
	reg := graylb.NewRegistry()
	list := []adapter.Endpoint[conn]{endpoint(1, false, conn{"p1", true}), endpoint(2, false, conn{"p2", true})}
	for _, ep := range list {
		require.NoError(t, reg.Register(ep.Instance))
	}
	lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1}))
	require.NoError(t, err)
	defer lb.Close()
	b := adapter.For(lb)
	_, err = b.Route(context.Background(), "svc", nil) // the Cache follows svc
	require.NoError(t, err)
	e, err := adapter.NewEndpoints(b, "svc", list, ready)
	require.NoError(t, err)
	rt, err := e.Route(context.Background(), gray("false"))
	require.NoError(t, err)
	h, call, ok := rt.Start()
	require.True(t, ok)
	require.NotNil(t, call.Stats())
	assert.True(t, call.Tracked())
	assert.EqualValues(t, 1, call.Stats().InFlight())
	ejected := make(chan string, 4)
	defer b.OnEjectionChange(func(s string) { ejected <- s })()
	call.End(adapter.Failed)
	assert.EqualValues(t, 0, call.Stats().InFlight())
	select {
	case s := <-ejected:
		require.Equal(t, "svc", s)
	case <-time.After(5 * time.Second):
		t.Fatal("the failed endpoint was not ejected")
	}
	// A routing built after the ejection leaves the failed endpoint out.
	e, err = adapter.NewEndpoints(b, "svc", list, ready)
	require.NoError(t, err)
	seen := picks(t, e, "false", 10)
	assert.Zero(t, seen[h.name], "the ejected endpoint was picked: %v", seen)
}

// Routing and picking over endpoints allocates nothing on a stable list,
// whatever the policy, with Stats kept or not.
func TestEndpoints_Allocations(t *testing.T) {
	for _, c := range []struct {
		opts    []graylb.Option
		tracked bool // Stats kept: the calls end through them
	}{
		{nil, false},
		{[]graylb.Option{graylb.WithOutlierDetection(graylb.OutlierConfig{})}, true},
		{[]graylb.Option{graylb.WithPolicy(policy.P2C())}, true},
		{[]graylb.Option{graylb.WithPolicy(policy.WeightedRoundRobin())}, false},
	} {
		// Stats are kept for the instances the LoadBalancer's Cache follows.
		reg := graylb.NewRegistry()
		var list []adapter.Endpoint[conn]
		for i := range 20 {
			ep := endpoint(i+1, i%4 == 0, conn{strconv.Itoa(i), i%5 != 1})
			require.NoError(t, reg.Register(ep.Instance))
			list = append(list, ep)
		}
		lb, err := graylb.New(reg, c.opts...)
		require.NoError(t, err)
		t.Cleanup(func() { lb.Close() })
		b := adapter.For(lb)
		_, err = b.Route(context.Background(), "svc", nil) // the Cache follows svc
		require.NoError(t, err)
		e, err := adapter.NewEndpoints(b, "svc", list, ready)
		require.NoError(t, err)
		ctx := context.Background()
		h := gray("true")
		rt, err := e.Route(ctx, h)
		require.NoError(t, err)
		_, probe, _ := rt.Start()
		probe.End(adapter.Cancelled)
		require.Equal(t, c.tracked, probe.Tracked(), "calls tracked with %d options", len(c.opts))
		allocs := testing.AllocsPerRun(200, func() {
			rt, _ := e.Route(ctx, h)
			_, call, _ := rt.Start()
			call.End(adapter.OK)
		})
		assert.Zero(t, allocs)
	}
}
