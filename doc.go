// Package graylb is a client-side, gray-aware load balancer.
//
// Services that share one registry run production ("prod") instances and
// gray (canary) instances side by side. A gray instance says so in its
// metadata (gray=true); a request says whether it is gray with a header
// (gray: true), and every hop passes that header on. A LoadBalancer picks
// only instances of the request's kind:
//
//   - a prod request reaches prod instances only; with none, the pick
//     fails with an error that wraps [ErrNoInstance];
//   - a gray request reaches gray instances; when the service has no
//     usable gray instance, it reaches every instance (the prod
//     fall-back).
//
// An instance that cannot serve (unhealthy, ejected as an outlier, found
// unreachable by a retry) counts as absent, so a prod request never
// reaches gray, whatever fails.
//
// "true" in any letter case means gray; anything else (absent, empty,
// "false", "yes", " true") means prod. The request's value is the first
// non-empty one of: the gray header of the call (read by the adapters, or
// a [ContextHandler]), a value the program put on the context
// ([WithValue]), and the calling service's own flag ([WithSelfGray]).
// [Rules], changed at run time, add gray users, gray addresses, a canary
// percentage, match rules and the rollback lever.
//
// A LoadBalancer runs the gray decision, then the filters, then the
// load-balancing policy, over instance lists cached from a [Supplier] (the
// in-memory [Registry], or the nacos module's). A pick on a stable list
// costs O(1) in the number of instances and allocates nothing.
//
// # Where things are
//
// This package is what a program calls: [New] and its options, the
// LoadBalancer's methods (Pick, Service, SetRules, Keys, Close, and the
// introspection Services, Snapshot, RulesState, Ejections, Unrouted), and
// the types they take and return. Beside it:
//
//   - policy: the load-balancing policies (RoundRobin, P2C, ...) and the
//     Policy interface;
//   - filter: the version and partition filters, and what a filter is
//     written against;
//   - filerules: rules read from a local file;
//   - debugpage: the operators' page and the pick counters it shows;
//   - adapter: what transport adapters are written against; httpctx
//     (net/http) is one, and the grpcctx, kratos, gozero, otelgraylb,
//     nacos and redisrules modules hold the others.
//
// This package depends on the standard library only.
package graylb
