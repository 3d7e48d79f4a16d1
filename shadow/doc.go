// Package shadow is graylb's dark launch: a share of prod requests
// mirrored to the gray build, their answers compared with prod's and never
// returned, and every write a mirrored copy would make, on any hop,
// refused.
//
// The share is in the rules (graylb.Rules.ShadowPercent, hot-reloaded
// like the canary; 0 by default). httpctx's Transport mirrors GET, HEAD
// and OPTIONS requests, grpcctx's interceptors the unary methods the
// program marks idempotent; the copy goes out beside the primary, never
// delays it, and its answer is read, compared (status, latency, body:
// exact, or as JSON without the paths ignored and those that differ
// between two prod answers) and discarded. A copy carries a mark
// (adapter.ShadowKey) that travels like the kind: under it every call
// goes to gray instances only (a service with none fails it), a write
// (POST, PUT, PATCH, DELETE; a gRPC method not marked idempotent) fails
// with an error wrapping ErrWrite unless the program allowed it
// (AllowWrites), and no Kafka record is produced. A noise sample (the call
// sent to a second prod instance to learn which fields differ between
// prod answers) is marked too (adapter.SampleValue): it routes as prod,
// its writes are refused the same way. An untrusted caller cannot set
// either mark.
//
// What happens is told to the LoadBalancer's shadow observers
// (WithObserver; otelgraylb counts it) and the last differing answers are
// on the debug page.
package shadow
