// Package matrixtest runs the cross-transport matrix of DESIGN.md §6: every
// server adapter (httpctx's middleware, grpcctx's server interceptors,
// Kratos' HTTP and gRPC servers with graylbkratos.Server, go-zero's rest
// middleware and zrpc server interceptors) against every client adapter
// (httpctx's Transport, grpcctx's resolver and balancer, Kratos' HTTP and
// gRPC clients with graylbkratos.Client and graylb's selector, go-zero's
// zrpc client), a Kafka record among them (kafkagray's producer and
// consumer, the record handed over in memory: records_test.go), over three
// hops: an edge caller, then services A, B and C,
// each with its own LoadBalancer (no ContextHandler), a prod, a gray and a
// lane instance serving on loopback, all over one in-memory registry, under
// one rules document (a 50 % canary, a gray user, a match rule giving a
// lane). Each instance answers who it is after the answer of the next hop,
// called with its own request context, so the edge sees the whole chain;
// a chain with a hop of another kind than the request's is wrong.
//
// A service that receives over one transport and calls over another must
// keep the request's kind: what a server side admitted lives in one
// context value owned by the core, which every client side reads. The
// cells whose chain changes adapter family fail while each adapter keeps
// the incoming keys in a context slot of its own.
//
// It also runs the conformance suite's key parts for otelgraylb's W3C
// baggage over HTTP and gRPC (conformance_test.go). It is a module of its
// own because it needs the core, grpcctx, kratos, gozero, kafkagray and
// otelgraylb together; it holds tests only.
package matrixtest
