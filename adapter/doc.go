// Package adapter is graylb's integration surface: what a transport adapter
// (net/http in httpctx, gRPC in grpcctx, OpenTelemetry in otelgraylb, or a
// framework's client and server hooks) uses of a LoadBalancer, apart from
// the API a program calls. It plays the part grpc-go's balancer and
// resolver packages play beside package grpc.
//
// The rule that splits the two: a method or type belongs here when only
// code that carries requests over a transport needs it — reading a call's
// keys, routing and rerouting a call, starting and reporting calls,
// writing the decision for the next hop, following rule and ejection
// changes, reaching the LoadBalancer's Cache and Policy. What a program
// configures, picks with by hand, or inspects (New and its options, Pick,
// Service, Keys, SetRules, Close, Snapshot, Services, RulesState,
// Ejections, Unrouted, and the types they take and return) stays in
// package graylb.
//
// An adapter is written against this package alone, in this order for
// each call:
//
//  1. Read the request's keys: [Balancer.Keys] names the gray, user and
//     version keys, [Balancer.MatchKeys] the keys the match rules in force
//     read (per request: rules change at run time). The adapter passes a
//     graylb.ContextHandler that reads its call's headers or metadata to
//     the methods below.
//  2. Decide the kind once: [Balancer.Route] decides while routing and
//     returns the [Decision] in its [Route]; an adapter that writes the
//     decision without routing (a client interceptor ahead of a balancer)
//     asks [Balancer.Decide].
//  3. Pick: [Route.Start] picks a candidate and starts a [Call];
//     [Balancer.Reroute] gives a retry's candidates around the instances
//     that failed; [Balancer.NewRouter] builds a [Router] over an instance
//     list the adapter is handed (a framework's balancer or selector).
//  4. Report the outcome: [Call.Done] (or [Call.Discard] for a cancelled
//     call); [Balancer.Report] for a result obtained without a Call.
//  5. Write the decision for the next hop: [Balancer.Pass] gives the
//     key-value pairs to write on the outgoing call for a Route's
//     Decision; [Balancer.PassFor] for a call that has no Route of its own
//     (a client interceptor ahead of a balancer).
//
// Lifecycle: [Balancer.OnRulesChange] and [Balancer.OnEjectionChange] say
// when routing an adapter keeps of its own must be rebuilt;
// [Balancer.Cache] is the instance lists the LoadBalancer follows;
// [Balancer.Policy] its load-balancing policy.
//
// A Balancer adds no allocation to a call: a Route holds its candidates as
// a pointer in an interface, and each operation is one method call on it.
package adapter
