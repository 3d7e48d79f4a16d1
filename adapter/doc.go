// Package adapter is graylb's integration surface: what a transport adapter
// (net/http in httpctx, gRPC in grpcctx, OpenTelemetry in otelgraylb, or a
// framework's client and server hooks) uses of a LoadBalancer, apart from
// the API a program calls, as grpc-go's balancer and resolver packages sit
// beside package grpc. A method or type belongs here when only code that
// carries requests over a transport needs it; what a program configures,
// picks with by hand or inspects stays in package graylb.
//
// An adapter obtains the surface once, with [For], and is written against
// this package alone. Its server side admits each incoming call:
// [Balancer.Admitter] over a [Carrier] of the call's keys (headers,
// metadata, a record's headers), with the trust boundary and the program's
// user id ([Admission]). The context Admit returns carries the request's
// routing state, which every client side reads whatever its transport.
// Its client side, for each call it makes:
//
//  1. routes it: [Balancer.Route] decides the kind once and returns the
//     [Decision] and the candidates ([NewEndpoints] over endpoints of the
//     adapter's own, [Balancer.NewRouter] over an instance list);
//  2. picks: [Route.Start] starts a [Call] ([Balancer.Reroute] for a retry);
//  3. ends the call with its [Result] once the caller is done with the
//     answer ([Call.End]; [HTTPResult], [GRPCResult] and [ResultOf] are the
//     one reading of a result every adapter shares);
//  4. writes the next hop: [Balancer.Stamp] over a [Carrier] of the
//     outgoing call's keys, the mirror of Admit.
//
// [Balancer.OnRulesChange] and [Balancer.OnEjectionChange] say when routing
// an adapter keeps of its own must be rebuilt. A Balancer adds no
// allocation to a call. docs/adapters.md walks through an adapter; package
// adaptertest is the conformance suite each adapter runs.
package adapter
