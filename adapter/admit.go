package adapter

import (
	"context"

	"github.com/graylb/graylb/internal/routestate"
)

// Carrier is the keys of one incoming call as a server adapter holds them:
// HTTP headers, gRPC metadata, a framework's request header, a record's
// headers. Names are case-insensitive: Get, Set and Delete match a name in
// any letter case.
type Carrier interface {
	// Get returns the first value of name, "" when the call has none.
	Get(name string) string
	// Set replaces every value of name with value.
	Set(name, value string)
	// Delete removes name, in every letter case; a name the call does not
	// carry is no error.
	Delete(name string)
}

// ContextCarrier is a Carrier that keeps copies of the call's keys on the
// call's context (gRPC's incoming metadata, a framework's server
// metadata): Context returns ctx carrying them as the Carrier's changes
// left them. Admit gives Admission.User that context.
type ContextCarrier interface {
	Carrier
	Context(ctx context.Context) context.Context
}

// Admission says how one incoming call is admitted.
type Admission struct {
	// Untrusted: the caller is outside the trust boundary (a public
	// gateway). No routing key it sent is kept: each is deleted from the
	// call's carrier, in any letter case, and every call made with the
	// returned context settles its kind (see Balancer.Stamp).
	Untrusted bool
	// User, when not nil, gives the program's user id for the call (an
	// authenticated user; "" for none): it replaces whatever the caller
	// sent under the user key, in the carrier too (deleted when it is ""),
	// and in its baggage when the LoadBalancer reads baggage.
	// It is asked after an untrusted caller's keys are deleted, with the
	// call's context as admitted so far: marked untrusted
	// (UntrustedCaller) for such a caller, and carrying the
	// carrier's changes when it is a ContextCarrier.
	User func(ctx context.Context) string
	// Queued: the call is a record consumed from a queue, not a request a
	// caller sent to this instance after picking it from the registry: a
	// graceful stop waiting for callers to stop (graylb.LoadBalancer.Quiet)
	// does not wait for it.
	Queued bool
}

// Admitter admits incoming calls for one server adapter: it keeps the
// routing keys of each call on its context as the request's routing state,
// which every client adapter and LoadBalancer.Pick read, whatever
// transport the call came over and whatever transport the calls it makes
// use. It is safe for concurrent use.
type Admitter struct {
	b                         *Balancer
	names                     []string // lower case, each once: the LoadBalancer's keys, then the extra ones
	grayKey, userKey, version string   // lower case: the keys whose role the state keeps
}

// Admitter returns the Admitter of the LoadBalancer's keys (gray, user,
// version, its filters' keys), of the keys its match rules in force name
// (read per call: rules change at run time) and of extra, names a program
// adds (a header its own filters read). A nil Balancer has the default key
// names and no match rules.
func (b *Balancer) Admitter(extra ...string) *Admitter {
	keys := b.Keys()
	keys.Match = nil
	a := &Admitter{b: b, grayKey: routestate.Lower(keys.Gray), userKey: routestate.Lower(keys.User), version: routestate.Lower(keys.Version)}
	for _, n := range append(append(keys.Names(), ShadowKey), extra...) {
		if n = routestate.Lower(n); n != "" && !has(a.names, n) {
			a.names = append(a.names, n)
		}
	}
	return a
}

// Routing reports whether name is a routing key: one the Admitter keeps or
// one the match rules in force name, in any letter case.
func (a *Admitter) Routing(name string) bool {
	return hasFold(a.names, name) || hasFold(a.b.MatchKeys(), name)
}

// Admit admits the incoming call whose keys c holds, served with ctx, and
// returns ctx carrying its routing state: the values of the routing keys
// c carries, or its baggage does when the LoadBalancer reads baggage
// (WithBaggage; a key the call carries wins), after the trust
// boundary and the program's user id did their part (see Admission);
// which of them is the gray key, the user id and the version, so that a
// LoadBalancer whose names differ reads them there; whether the caller is
// trusted; and room for the canary's draw, made once for the request. For
// an untrusted caller the routing members go from the call's baggage
// header and from the baggage ctx carries. A context that already carries
// a state of an untrusted caller (an outer server side) stays untrusted.
// Admit modifies c only for an untrusted caller or with Admission.User.
func (a *Admitter) Admit(ctx context.Context, c Carrier, how Admission) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	if c == nil {
		c = noKeys{}
	}
	if a.b != nil && !how.Queued {
		a.b.e().Admitted()
	}
	untrusted := how.Untrusted || routestate.From(ctx).IsUntrusted()
	match := a.b.MatchKeys()
	bag := a.b.baggage()
	if untrusted {
		// By name, in every letter case: whatever else the call carries.
		for _, n := range a.names {
			c.Delete(n)
		}
		for _, n := range match {
			c.Delete(n)
		}
		if bag != nil {
			stripBaggage(bag, c, a.Routing)
			ctx = bag.ContextWithout(ctx, a.Routing)
		}
	}
	if how.User != nil {
		uctx := ctx
		if untrusted {
			uctx = routestate.With(uctx, routestate.New(nil, true))
		}
		if cc, ok := c.(ContextCarrier); ok {
			uctx = cc.Context(uctx)
		}
		u := how.User(uctx)
		c.Delete(a.userKey)
		if bag != nil && !untrusted {
			// The caller's user id goes from its baggage too, and from the
			// baggage the context carries: the program's replaces it.
			isUser := func(n string) bool { return routestate.SameName(a.userKey, n) }
			stripBaggage(bag, c, isUser)
			ctx = bag.ContextWithout(ctx, isUser)
		}
		if u != "" {
			c.Set(a.userKey, u)
		}
	}
	var members []string // the values of a.names then match in the call's baggage
	if bag != nil && !untrusted {
		if v := c.Get(bag.Header()); v != "" {
			members = bag.Members(v, append(append([]string(nil), a.names...), match...))
		}
	}
	var st *routestate.State // made on the first key kept: one allocation
	keep := func(n string, i int) {
		v := c.Get(n)
		if v == "" && i < len(members) {
			v = members[i] // a key the call carries wins over its baggage
		}
		if v != "" {
			if st == nil {
				st = routestate.New(nil, untrusted)
			}
			st.Add(n, v)
		}
	}
	for i, n := range a.names {
		keep(n, i)
	}
	for i, n := range match {
		if !has(a.names, n) {
			keep(n, len(a.names)+i)
		}
	}
	if st == nil {
		if !untrusted && !a.b.rulesDraw() {
			return ctx
		}
		st = routestate.New(nil, untrusted)
	}
	markCopy(st, st.Get(ShadowKey))
	// What each key means to this LoadBalancer: one whose names differ
	// reads the kind, user and version there.
	st.SetRole(routestate.RoleGray, a.grayKey)
	st.SetRole(routestate.RoleUser, a.userKey)
	st.SetRole(routestate.RoleVersion, a.version)
	return routestate.With(ctx, st)
}

// stripBaggage deletes from c's baggage header the members drop names,
// the header itself when none is left.
func stripBaggage(bag Baggage, c Carrier, drop func(string) bool) {
	h := bag.Header()
	v := c.Get(h)
	if v == "" {
		return
	}
	switch nv := bag.Without(v, drop); {
	case nv == "":
		c.Delete(h)
	case nv != v:
		c.Set(h, nv)
	}
}

// baggage is the LoadBalancer's Baggage, nil when it reads none.
func (b *Balancer) baggage() Baggage {
	if b == nil {
		return nil
	}
	return b.e().Baggage()
}

// noKeys is the Carrier of a call that carries no key.
type noKeys struct{}

func (noKeys) Get(string) string  { return "" }
func (noKeys) Set(string, string) {}
func (noKeys) Delete(string)      {}

// rulesDraw reports whether the rules in force draw the kind of a request
// that carries no key (a canary): its state then holds the draw, made
// once. (A canary set while a request is served, after its admission,
// draws for each of its calls.)
func (b *Balancer) rulesDraw() bool { return b != nil && b.e().RulesDraw() }

// Kept is the routing keys a server side admitted for the request being
// served: what a client adapter writes on each call the request makes that
// does not carry them itself. The zero Kept has none.
type Kept struct{ s *routestate.State }

// KeptFrom returns the routing keys admitted for the request served with
// ctx.
func KeptFrom(ctx context.Context) Kept { return Kept{routestate.From(ctx)} }

// Len returns the number of keys.
func (k Kept) Len() int { return len(k.s.Pairs()) }

// At returns key i: its name, in lower case, and its value.
func (k Kept) At(i int) (name, value string) {
	p := k.s.Pairs()[i]
	return p.Name, p.Value
}

// Values returns key i's value as a one-element slice shared by every
// caller, to store in an http.Header or gRPC metadata without allocating:
// do not modify it.
func (k Kept) Values(i int) []string { return k.s.ValueSlice(i) }

// Get returns the value of name, in any letter case, "" when none was
// admitted.
func (k Kept) Get(name string) string { return k.s.Get(name) }

// Untrusted reports whether the request's caller is outside the trust
// boundary (UntrustedCaller).
func (k Kept) Untrusted() bool { return k.s.IsUntrusted() }

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hasFold reports whether name, in any letter case, is in list (lower
// case names).
func hasFold(list []string, name string) bool {
	for _, x := range list {
		if routestate.SameName(x, name) {
			return true
		}
	}
	return false
}
