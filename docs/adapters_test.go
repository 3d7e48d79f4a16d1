package docs

import (
	"context"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// mapReader reads a made-up transport's headers (a map in the context).
type mapReader struct{}

type mapKey struct{}

func (mapReader) Value(ctx context.Context, name string) string {
	h, _ := ctx.Value(mapKey{}).(map[string]string)
	return h[name]
}

// docs/adapters.md: one call through the adapter surface.
func TestAdapterSurface(t *testing.T) {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("orders", "10.0.0.1", 80, nil))
	reg.Register(graylb.NewInstance("orders", "10.0.0.2", 80, map[string]string{"gray": "true", "version": "v2"}))
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{CanaryPercent: 100,
		Matches: []graylb.Match{{Key: "uid", Exact: "carol", Gray: true, Version: "v2"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	ctx := context.WithValue(context.Background(), mapKey{}, map[string]string{"uid": "carol"})
	out := mapCarrier{}
	send := func(graylb.Instance, mapCarrier) error { return nil }

	// snippet: adapter-call
	b := adapter.For(lb) // once, when the adapter is built

	route, err := b.Route(ctx, "orders", mapReader{}) // read the keys, decide once, route
	if err != nil {
		t.Fatal(err) // a real adapter fails the call with err
	}
	call := route.Start() // pick

	// write the request's routing state for the next hop, the mirror of Admit:
	// the admitted keys, the kind, and a match rule's lane unless the call
	// carries a version (out is the outgoing call's keys, an adapter.Carrier)
	b.Stamp(ctx, out, &route.Decision)
	err = send(call.Instance, out)
	call.End(adapter.Answer(err != nil)) // end the call with its result
	// end snippet

	if err != nil || call.Instance.Addr() != "10.0.0.2:80" || out["gray"] != "true" || out["version"] != "v2" {
		t.Fatalf("err %v, instance %s, written %v: want the gray instance, gray=true and version=v2 (the match rule's lane)", err, call.Instance.Addr(), out)
	}
}

// docs/adapters.md: a server side admits an incoming call.
func TestAdapterAdmit(t *testing.T) {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("orders", "10.0.0.1", 80, nil))
	reg.Register(graylb.NewInstance("orders", "10.0.0.2", 80, map[string]string{"gray": "true"}))
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	for _, c := range []struct {
		inside bool
		user   string
		want   string
	}{{true, "", "10.0.0.2:80"}, {false, "", "10.0.0.1:80"}, {false, "alice", "10.0.0.2:80"}} {
		ctx := context.Background()
		headers := mapCarrier{"gray": "true"}
		fromInsideTheBoundary, authenticatedUser := c.inside, c.user

		// snippet: adapter-admit
		adm := adapter.For(lb).Admitter() // once, when the server side is built

		// for each incoming call: its keys over a Carrier, the trust boundary, the user id
		ctx = adm.Admit(ctx, headers, adapter.Admission{
			Untrusted: !fromInsideTheBoundary,
			User:      func(context.Context) string { return authenticatedUser },
		})
		// the handler runs with ctx: every call it makes, over any transport, routes by what was admitted
		// end snippet

		in, err := lb.Pick(ctx, "orders")
		if err != nil || in.Addr() != c.want {
			t.Errorf("inside %v, user %q: %s %v, want %s", c.inside, c.user, in.Addr(), err, c.want)
		}
	}
}

// mapCarrier is a made-up transport's incoming keys.
type mapCarrier map[string]string

func (m mapCarrier) Get(name string) string { return m[strings.ToLower(name)] }

func (m mapCarrier) Set(name, value string) { m[strings.ToLower(name)] = value }

func (m mapCarrier) Delete(name string) { delete(m, strings.ToLower(name)) }

func (m mapCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// conn is a made-up transport's connection to one instance.
type conn struct {
	addr  string
	ready bool
}

func (c *conn) send(map[string]string) error { return nil }

// docs/adapters.md: a balancer routes over connections of its own.
func TestAdapterEndpoints(t *testing.T) {
	reg := graylb.NewRegistry()
	prod := graylb.NewInstance("orders", "10.0.0.1", 80, nil)
	grayInst := graylb.NewInstance("orders", "10.0.0.2", 80, map[string]string{"gray": "true"})
	reg.Register(prod)
	reg.Register(grayInst)
	lb, err := graylb.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	b := adapter.For(lb)
	c1, c2 := &conn{addr: prod.Addr(), ready: true}, &conn{addr: grayInst.Addr(), ready: true}
	ctx := context.WithValue(context.Background(), mapKey{}, map[string]string{"gray": "true"})
	out := map[string]string{}

	// snippet: adapter-endpoints
	// built when the connections or their states change, and again on
	// OnRulesChange and OnEjectionChange
	eps, err := adapter.NewEndpoints(b, "orders", []adapter.Endpoint[*conn]{
		{Instance: prod, Handle: c1},
		{Instance: grayInst, Handle: c2},
	}, func(c *conn) bool { return c.ready })
	if err != nil {
		t.Fatal(err)
	}

	// for each call
	route, err := eps.Route(ctx, mapReader{})
	if err != nil {
		t.Fatal(err) // the request's kind has no endpoint: fail the call with err
	}
	c, call, ok := route.Start() // the policy's pick among the usable candidates
	if !ok {
		t.Fatal("none usable") // candidates, none usable yet: wait for one, or fail
	}
	err = c.send(out)
	result, known := adapter.ResultOf(err) // OK, cancelled, the caller's deadline
	if !known {
		result = adapter.Failed // the transport maps its own errors
	}
	call.End(result)
	// end snippet

	if c != c2 || route.Kind != graylb.Gray {
		t.Fatalf("picked %s for a %s request: want the gray instance's connection", c.addr, route.Kind)
	}
}
