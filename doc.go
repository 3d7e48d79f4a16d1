// Package graylb is a client-side, gray-aware load balancer.
//
// Services that share one registry run production ("prod") and gray
// (canary) instances side by side. A gray instance says so in its metadata
// (gray=true); a request says whether it is gray with a header (gray:
// true), and every hop passes that header on. A LoadBalancer picks only
// instances of the request's kind: a prod request reaches prod instances
// only (with none, the pick fails with an error wrapping [ErrNoInstance]);
// a gray request reaches gray instances, or every instance when the
// service has no usable gray one (the prod fall-back). An instance that
// cannot serve (unhealthy, ejected as an outlier, found unreachable by a
// retry) counts as absent, so a prod request never reaches gray, whatever
// fails.
//
// "true" in any letter case means gray; anything else (absent, empty,
// "false", "yes", " true") means prod: nothing is trimmed. The request's
// value is the first non-empty one of the call's gray header (read by the
// adapters, or a [ContextHandler]), a value the program put on the context
// ([WithValue]), and the calling service's own flag ([WithSelfGray]).
// [Rules], changed at run time, add gray users, gray addresses, a canary
// percentage, match rules and the rollback lever.
//
// This package is what a program calls: [New] and its options, the
// LoadBalancer's methods, and the types they take and return; it depends
// on the standard library only. Beside it: policy (the load-balancing
// policies), filter (the version and partition filters), filerules (rules
// read from a file), debugpage (the operators' page), and adapter (what
// transport adapters are written against: httpctx, for net/http, is one).
// docs/api.md says which name is where.
package graylb
