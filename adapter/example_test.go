package adapter_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// headers is a made-up transport's request: a map of header names (in
// lower case) to values.
type headers map[string]string

// headersKey carries the incoming request's headers in a context.
type headersKey struct{}

// reader reads the incoming request's headers from the context: the
// graylb.ContextHandler an adapter passes for the call it routes. It
// allocates nothing.
type reader struct{}

func (reader) Value(ctx context.Context, name string) string {
	h, _ := ctx.Value(headersKey{}).(headers)
	return h[strings.ToLower(name)]
}

// A minimal adapter for a transport whose requests are maps of headers:
// read the keys, decide and route, call, report the outcome, and write the
// decision on the outgoing request for the next hop.
func Example() {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("orders", "10.0.0.1", 80, nil))
	reg.Register(graylb.NewInstance("orders", "10.0.0.2", 80, map[string]string{"gray": "true"}))
	lb, _ := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	defer lb.Close()
	b := adapter.For(lb) // once, when the adapter is built

	send := func(in headers) {
		ctx := context.WithValue(context.Background(), headersKey{}, in)
		// 2 and 3. Decide the kind once and route.
		route, err := b.Route(ctx, "orders", reader{})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		call := route.Start()
		// The outgoing request: the request's routing state, written by
		// the mirror of admission.
		out := headers{}
		b.Stamp(ctx, mapOut(out), &route.Decision)
		// ... send out to call.Instance over the transport ...
		// 4. End the call with its result.
		call.End(adapter.OK)
		fmt.Printf("%s %s/%s: wrote gray=%q\n", call.Instance.Addr(), call.Service, call.Kind, out["gray"])
	}
	send(headers{"uid": "alice"}) // a gray user: rules decide, so the kind is written
	send(headers{"uid": "bob"})   // nothing decides: prod, nothing written
	send(headers{"gray": "true"}) // the key travels as it is
	// Output:
	// 10.0.0.2:80 orders/gray: wrote gray="true"
	// 10.0.0.1:80 orders/prod: wrote gray=""
	// 10.0.0.2:80 orders/gray: wrote gray="true"
}

// mapOut is headers as the Carrier Stamp writes.
type mapOut headers

func (m mapOut) Get(name string) string { return m[strings.ToLower(name)] }
func (m mapOut) Set(name, v string)     { m[strings.ToLower(name)] = v }
func (m mapOut) Delete(name string)     { delete(m, strings.ToLower(name)) }
