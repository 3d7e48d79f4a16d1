// Package adapter is graylb's integration surface: what a transport adapter
// (net/http in httpctx, gRPC in grpcctx, OpenTelemetry in otelgraylb, or a
// framework's client and server hooks) uses of a LoadBalancer, apart from
// the API a program calls. It plays the part grpc-go's balancer and
// resolver packages play beside package grpc.
//
// The rule that splits the two: a method or type belongs here when only
// code that carries requests over a transport needs it — reading a call's
// keys, routing and rerouting a call, starting and ending calls,
// writing the decision for the next hop, following rule and ejection
// changes, reaching the LoadBalancer's Cache. What a program
// configures, picks with by hand, or inspects (New and its options, Pick,
// Service, Keys, SetRules, Close, Snapshot, Services, RulesState,
// Ejections, Unrouted, and the types they take and return) stays in
// package graylb.
//
// An adapter is written against this package alone. A server side does
// one thing for each incoming call:
//
//  0. Admit it: [Balancer.Admitter] over a [Carrier] of the call's keys
//     (headers, metadata, a record's headers), with the trust boundary and
//     the program's user id ([Admission]). The context it returns carries
//     the request's routing state, which every client side reads whatever
//     its transport: a service that receives HTTP and calls gRPC (or
//     receives a record and calls HTTP) keeps the request's kind, and
//     the canary draws once per request served.
//
// A client side does, for each call it makes:
//
//  1. Route: [Balancer.Route] reads the call's keys through a
//     graylb.ContextHandler over its outgoing headers or metadata (then the
//     request's admitted keys), decides the kind once and returns the
//     [Decision] and the candidates in a [Route]. An adapter that reaches
//     instances through endpoints of its own (gRPC's SubConns, a
//     framework's nodes) routes over them with [NewEndpoints];
//     [Balancer.NewRouter] routes over an instance list it is handed.
//  2. Pick: [Route.Start] picks a candidate and starts a [Call]
//     ([EndpointRoute.Start] yields the endpoint's handle too);
//     [Balancer.Reroute] gives a retry's candidates around the instances
//     that failed.
//  3. End the call with its [Result]: [Call.End] feeds the instance's
//     Stats (ejection, P2C) and the CallObserver alike whatever the
//     policy, when the caller is done with the answer; [HTTPResult] and
//     [GRPCResult] are the one reading of an answer's status every adapter
//     shares; [ResultOf] reads what an error says without the transport;
//     [Balancer.Report] reports a result obtained without a Call.
//  4. Write the next hop: [Balancer.Stamp] over a [Carrier] of the
//     outgoing call's keys, the mirror of Admit (with a nil Decision for a
//     call that has no Route of its own: a client interceptor ahead of a
//     balancer).
//
// Lifecycle: [Balancer.OnRulesChange] and [Balancer.OnEjectionChange] say
// when routing an adapter keeps of its own must be rebuilt;
// [Balancer.Cache] is the instance lists the LoadBalancer follows.
//
// A Balancer adds no allocation to a call: a Route holds its candidates as
// a pointer in an interface, and each operation is one method call on it.
package adapter
