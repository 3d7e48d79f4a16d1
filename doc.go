// Package graylb is a client-side, gray-aware load balancer.
//
// Services that share one registry run production ("prod") instances and gray
// (canary) instances side by side. A gray instance says so in its metadata
// (gray=true); a request says whether it is gray with a header (gray: true),
// and every hop passes that header on. graylb picks only instances of the
// request's kind:
//
//   - a prod request reaches prod instances only; with none, the pick fails
//     with an error that wraps [ErrNoInstance];
//   - a gray request reaches gray instances; when the list holds no gray
//     instance at all it reaches every instance (the prod fall-back).
//
// An instance that cannot serve counts as absent: one ejected as an outlier
// ([WithOutlierDetection]), or one a retry found unreachable
// (a retry's reroute, which the adapters' retries make through package
// adapter). So a gray
// request whose gray instances all cannot serve falls back to prod, and a
// prod request never reaches gray, whatever fails.
//
// The value "true" in any letter case means gray; anything else (absent,
// empty, "false", "yes", " true") means prod. Nothing is trimmed.
//
// The request's value is the first non-empty one of: the gray header read
// through the [ContextHandler] (net/http and gRPC adapters live in the httpctx
// and grpcctx packages), a value the program put on the context with
// [WithValue], and the calling service's own gray flag ([WithSelfGray]).
//
// A [LoadBalancer] runs the gray decision, then the user's [ServerFilter]s
// (such as the [VersionFilter] or a [PartitionFilter]), over a cached
// instance list from a [Supplier] (the in-memory [Registry], or the Nacos
// supplier in the nacos package). Everything that
// depends only on the instance list is computed once per list change, so a
// pick on a stable list costs O(1) in the number of instances and allocates
// nothing.
//
// # The user's API and the adapters' surface
//
// This package is what a program calls: New and its options, Pick and
// Service, Keys, SetRules, Close, the introspection the debug page shows
// (Snapshot, Services, RulesState, Ejections, Unrouted), and the types they
// take and return (Instance, Kind, Rules, the errors...). What only code
// that carries requests over a transport needs — routing and rerouting a
// call, starting and reporting calls, writing the decision for the next
// hop, following rule and ejection changes, the LoadBalancer's Cache and
// Policy — is in package adapter, against which httpctx, grpcctx and
// otelgraylb are written, as grpc-go keeps its balancer and resolver
// packages apart from package grpc. The rule for a new name: if a program
// that does not write an adapter has no use for it, it goes to adapter.
//
// This package depends on the standard library only.
package graylb
