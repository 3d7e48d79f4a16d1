package graylb

import (
	"context"

	"github.com/graylb/graylb/internal/engine"
)

// LoadBalancer picks an instance of a service for each request: the gray
// decision first, then the user's filters (WithFilters), then the
// load-balancing policy (WithPolicy) over what is left, over instance
// lists it caches from a Supplier. A pick on a stable list costs O(1) in
// the number of instances and allocates nothing. It is safe for concurrent
// use. Transport adapters reach it through package adapter.
type LoadBalancer engine.LoadBalancer

// New returns a LoadBalancer over the instances of s. Unless s is already
// a *Cache, New puts one over it (configured by WithCacheOptions), and
// Close closes it. With WithRuleSource, New waits for the source's first
// Load at most WithRuleLoadTimeout. It fails on a nil Supplier and on
// invalid rules given with WithRules.
func New(s Supplier, opts ...Option) (*LoadBalancer, error) {
	x, err := engine.New(s, opts...)
	return (*LoadBalancer)(x), err
}

func (lb *LoadBalancer) e() *engine.LoadBalancer { return (*engine.LoadBalancer)(lb) }

// Pick returns an instance of service for the request in ctx. A prod
// request gets a prod instance or an error; a gray request a gray
// instance, or any instance when the service has no usable gray one.
//
// A pick of a service already routed never blocks. The first pick of a
// service waits for its lookup (one per service, whoever asks; a lookup
// never delays another service) until ctx ends or the LoadBalancer closes.
//
// Errors wrap ErrNoInstance (the request's kind has no instance; the
// *NoInstanceError names the service and the kind), ErrInvalidService,
// ErrUnknownService (from the Supplier), ErrClosed, or ctx.Err() when ctx
// ended before the service's lookup did.
func (lb *LoadBalancer) Pick(ctx context.Context, service string) (Instance, error) {
	// Small enough to be inlined: the picked instance is copied once,
	// straight into the caller's result.
	in, err := lb.e().PickRef(ctx, service)
	if err != nil {
		return Instance{}, err
	}
	return *in, nil
}

// ServicePicker picks instances of one service, as LoadBalancer.Pick does
// for it, without looking the service up by name on every call:
//
//	Pick(ctx context.Context) (Instance, error)
//	Name() string
//
// It follows the service's instance lists and the rules as Pick does, and
// is safe for concurrent use.
type ServicePicker = engine.ServicePicker

// Service returns the ServicePicker of service. It does no I/O: its first
// Pick queries the Supplier. A name that cannot be a service's gives an
// error wrapping ErrInvalidService.
func (lb *LoadBalancer) Service(service string) (*ServicePicker, error) {
	return lb.e().Service(service)
}

// SetRules validates r and, if valid, puts it in force for every service
// at once. Invalid rules are refused with an error wrapping
// ErrInvalidRules, and the rules in force stay.
func (lb *LoadBalancer) SetRules(r Rules) error {
	return lb.e().SetRules(r)
}

// Keys are the names of the request values a LoadBalancer reads, which
// every adapter reads, passes on to the next hop, and drops from an
// untrusted caller's request:
//
//	Gray    string   // the gray value (WithGrayHeader; default "gray")
//	User    string   // the user id (WithUserHeader; default "uid")
//	Version string   // the version (filter.WithVersionHeader; default "version")
//	Filters []string // keys the LoadBalancer's own filters read
//	Match   []string // keys the match rules in force read, when they were asked for
//	GrayMetadata    string // the instance metadata key of the gray flag (WithGrayKey)
//	VersionMetadata string // the instance metadata key of the version (filter.WithVersionKey)
type Keys = engine.Keys

// DefaultKeys returns the default names: gray, uid, version.
func DefaultKeys() Keys { return engine.DefaultKeys() }

// Keys returns the names of the request values lb reads. A nil
// LoadBalancer has the default names.
func (lb *LoadBalancer) Keys() Keys {
	return lb.e().Keys()
}

// Detach returns a context for work that outlives the request served with
// ctx (a goroutine that runs after the handler returns): it is not
// cancelled with ctx and carries the request's routing state (the keys
// its server side admitted, its trust, the values set with WithValue) and
// the kind and lane lb decides for it now, rules and canary included,
// fixed: every pick and call made with it has that kind unless the call
// carries a gray key of its own. It carries none of ctx's other values.
func (lb *LoadBalancer) Detach(ctx context.Context) context.Context {
	return lb.e().Detach(ctx)
}

// Close stops following the Supplier and the rule source, and closes the
// Cache New made. Picks of services already in use keep serving their
// last lists; other services give ErrClosed. It cancels the lookups in
// flight, and the picks waiting on them return ErrClosed at once; it does
// not wait for the Supplier's calls to return. Calling it again does
// nothing.
func (lb *LoadBalancer) Close() error {
	return lb.e().Close()
}
