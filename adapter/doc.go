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
//  1. Read the request's keys: [Balancer.Keys] names the gray, user and
//     version keys, [Balancer.MatchKeys] the keys the match rules in force
//     read (per request: rules change at run time). The adapter passes a
//     graylb.ContextHandler that reads its outgoing call's headers or
//     metadata to the methods below; the admitted keys of the request
//     being served are read after it by the LoadBalancer itself.
//  2. Decide the kind once: [Balancer.Route] decides while routing and
//     returns the [Decision] in its [Route]; an adapter that writes the
//     decision without routing (a client interceptor ahead of a balancer)
//     asks [Balancer.Decide].
//  3. Pick: [Route.Start] picks a candidate and starts a [Call];
//     [Balancer.Reroute] gives a retry's candidates around the instances
//     that failed. An adapter that reaches instances through endpoints of
//     its own (gRPC's SubConns, a framework's nodes) routes over them
//     with [NewEndpoints]: [EndpointRoute.Start] yields the picked
//     endpoint's handle and its Call, the LoadBalancer's policy picking
//     among the usable ones. [Balancer.NewRouter] routes over an instance
//     list the adapter is handed.
//  4. End the call with its [Result]: [Call.End] (OK, Failed, Cancelled,
//     DeadlineNoAnswer, DeadlineAnswered), which feeds the instance's
//     Stats (ejection, P2C) and the CallObserver alike whatever the
//     policy; [ResultOf] reads what an error says without the transport
//     (cancelled, the caller's deadline); an answer's status is read by
//     [HTTPResult], or [GRPCResult] for a gRPC code the server sent, the
//     one reading every adapter shares so that an instance counts the
//     same over every transport; the adapter maps its transport's other
//     errors; [Balancer.Report] reports a result obtained without a
//     Call.
//  5. Write the keys for the next hop: the admitted keys the outgoing call
//     does not carry ([KeptFrom]), then the pairs [Balancer.Pass] gives for
//     the Route's Decision ([Balancer.PassFor] for a call that has no Route
//     of its own: a client interceptor ahead of a balancer).
//
// Lifecycle: [Balancer.OnRulesChange] and [Balancer.OnEjectionChange] say
// when routing an adapter keeps of its own must be rebuilt;
// [Balancer.Cache] is the instance lists the LoadBalancer follows.
//
// A Balancer adds no allocation to a call: a Route holds its candidates as
// a pointer in an interface, and each operation is one method call on it.
package adapter
