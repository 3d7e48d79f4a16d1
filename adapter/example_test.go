package adapter_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// keys are the keys of one call of a made-up transport, by lower-case
// name. They are the server side's adapter.Carrier of an incoming call,
// and the graylb.ContextHandler that reads an outgoing call's keys.
type keys map[string]string

func (k keys) Get(name string) string                      { return k[strings.ToLower(name)] }
func (k keys) Set(name, value string)                      { k[strings.ToLower(name)] = value }
func (k keys) Delete(name string)                          { delete(k, strings.ToLower(name)) }
func (k keys) Value(_ context.Context, name string) string { return k.Get(name) }

// network delivers a call to the server side listening at an address and
// returns its status and body.
var network = map[string]func(in keys) (status int, body string){}

// serve is the adapter's server side: it admits each incoming call (its
// keys, the trust boundary, the program's user id) and runs handler with
// the context Admit returns, which carries the request's routing state to
// every call handler makes, over any transport.
func serve(b *adapter.Balancer, admission func(in keys) adapter.Admission, handler func(ctx context.Context) (int, string)) func(keys) (int, string) {
	adm := b.Admitter() // once, when the server side is built
	return func(in keys) (int, string) {
		ctx := adm.Admit(context.Background(), in, admission(in))
		return handler(ctx)
	}
}

// call is the adapter's client side: it routes the request served with ctx
// to service (deciding its kind once), starts the call to the instance
// picked, writes the keys for the next hop, sends it, and ends the call
// with its result.
func call(ctx context.Context, b *adapter.Balancer, service string) (int, string) {
	out := keys{}
	route, err := b.Route(ctx, service, out)
	if err != nil {
		return 503, err.Error()
	}
	c := route.Start()
	b.Stamp(ctx, out, &route.Decision) // the next hop: the mirror of Admit
	status, body := network[c.Instance.Addr()](out)
	c.End(adapter.HTTPResult(status)) // ejection, P2C and the CallObserver read it
	return status, body
}

// A complete adapter for a made-up transport, on package adapter alone. A
// public edge admits callers from outside the trust boundary (their gray
// key is dropped; the user id is the authenticated user's), decides their
// kind under its rules (alice is a gray user) and calls orders, whose
// instances call payments. Each hop's server side admits the keys the hop
// before it wrote: the request's kind survives every hop, though only the
// edge has rules.
func Example() {
	reg := graylb.NewRegistry()
	lb, _ := graylb.New(reg) // the services' LoadBalancer: no rules
	defer lb.Close()
	b := adapter.For(lb) // once, when the adapter is built
	trusted := func(keys) adapter.Admission { return adapter.Admission{} }
	instance := func(service, host string, gray bool, handler func(context.Context) (int, string)) {
		reg.Register(graylb.NewInstance(service, host, 80, map[string]string{"gray": strconv.FormatBool(gray)}))
		network[host+":80"] = serve(b, trusted, handler)
	}
	for i, gray := range []bool{false, true} {
		name := map[bool]string{false: "prod", true: "gray"}[gray]
		instance("payments", fmt.Sprintf("10.0.1.%d", i+1), gray, func(context.Context) (int, string) {
			return 200, "payments-" + name
		})
		instance("orders", fmt.Sprintf("10.0.0.%d", i+1), gray, func(ctx context.Context) (int, string) {
			status, body := call(ctx, b, "payments")
			return status, "orders-" + name + " > " + body
		})
	}
	edgeLB, _ := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	defer edgeLB.Close()
	eb := adapter.For(edgeLB)
	users := map[string]string{"t-alice": "alice"} // the edge's authentication
	edge := serve(eb, func(in keys) adapter.Admission {
		return adapter.Admission{Untrusted: true, User: func(context.Context) string { return users[in.Get("token")] }}
	}, func(ctx context.Context) (int, string) { return call(ctx, eb, "orders") })

	for _, in := range []keys{
		{"gray": "true"},     // from outside: dropped at the edge
		{"token": "t-alice"}, // a gray user: the edge's rules decide, and the edge writes the kind
		{"uid": "alice"},     // a user id from outside: dropped too
	} {
		_, body := edge(in)
		fmt.Println("edge:", body)
	}
	// Inside the boundary, a caller's key travels as it is.
	internal := serve(b, trusted, func(ctx context.Context) (int, string) { return call(ctx, b, "orders") })
	_, body := internal(keys{"gray": "true"})
	fmt.Println("internal:", body)
	// Output:
	// edge: orders-prod > payments-prod
	// edge: orders-gray > payments-gray
	// edge: orders-prod > payments-prod
	// internal: orders-gray > payments-gray
}
