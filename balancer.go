package graylb

import (
	"context"

	"github.com/graylb/graylb/internal/engine"
)

// LoadBalancer picks an instance of a service for each request: the gray
// decision first, then the user's filters, over a cached instance list,
// then a load-balancing policy over what is left. It is safe for
// concurrent use.
//
// Routing is precomputed per instance-list or rules change into an
// immutable tree swapped atomically; Pick reads it without a lock, in O(1)
// in the number of instances, without allocating.
type LoadBalancer engine.LoadBalancer

// New returns a LoadBalancer over the instances of s. Unless s is already
// a *Cache, New puts one over it (and Close closes it). With a rule source,
// New waits for its first Load at most WithRuleLoadTimeout.
func New(s Supplier, opts ...Option) (*LoadBalancer, error) {
	x, err := engine.New(s, opts...)
	return (*LoadBalancer)(x), err
}

// SetRules validates r and, if valid, puts it in force for every service.
// Invalid rules are refused with an error wrapping ErrInvalidRules and the
// previous rules stay in force.
func (lb *LoadBalancer) SetRules(r Rules) error {
	return (*engine.LoadBalancer)(lb).SetRules(r)
}

// Pick returns an instance of service for the request in ctx.
//
// A pick of a service already routed never blocks. The first pick of a
// service waits for its lookup (one per service, whoever asks; a lookup
// never delays another service) until ctx ends or the LoadBalancer closes.
//
// Errors wrap ErrNoInstance (the request's kind has no instance; the
// *NoInstanceError names the service and the kind), ErrInvalidService,
// ErrUnknownService (from the supplier), ErrClosed, or ctx.Err() when ctx
// ended before the service's lookup did.
func (lb *LoadBalancer) Pick(ctx context.Context, service string) (Instance, error) {
	return (*engine.LoadBalancer)(lb).Pick(ctx, service)
}

// Close stops following the supplier and the rule source. Picks for
// services already in use keep serving their last lists; new services
// give ErrClosed. It cancels the lookups in flight, and the picks waiting
// on them return ErrClosed at once; it does not wait for the Supplier's
// calls to return.
func (lb *LoadBalancer) Close() error {
	return (*engine.LoadBalancer)(lb).Close()
}
