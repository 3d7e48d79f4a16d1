package grpcctx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"
)

// Scheme is the resolver's scheme: graylb:///<service>.
const Scheme = "graylb"

// attrKey is the address attribute key; its value is a *source.
type attrKey struct{}

// source is what an address came from: the LoadBalancer, the service and
// the instance.
type source struct {
	lb      *graylb.LoadBalancer
	ab      *adapter.Balancer // lb's adapter surface
	service string
	inst    graylb.Instance
}

// Equal compares sources by LoadBalancer, service and instance address, so
// a metadata change (a gray flip) keeps the address's connection.
func (s *source) Equal(o any) bool {
	t, ok := o.(*source)
	return ok && t.lb == s.lb && t.service == s.service && t.inst.Addr() == s.inst.Addr()
}

// InstanceOf returns the instance an address resolved by this package
// stands for.
func InstanceOf(a resolver.Address) (graylb.Instance, bool) {
	s, ok := a.Attributes.Value(attrKey{}).(*source)
	if !ok {
		return graylb.Instance{}, false
	}
	return s.inst, true
}

// NewResolverBuilder returns a resolver builder for graylb:///<service>
// over lb's Supplier (the in-memory registry, Nacos, or any other). Each
// address carries its instance (metadata, weight) as an attribute. The
// resolver follows the Supplier's changes through lb's Cache, which never
// hands over an empty list over a non-empty one while its empty-update
// protection holds (see graylb.Cache); an empty list it does hand over is
// pushed as it is. After each rules change it pushes its list again, so
// the balancer rebuilds its pickers under the new rules, off the pick path.
// It looks the service up after Build returns; a lookup that fails (the
// registry cannot be reached, or does not know the service) is the
// resolver's error, RPCs fail with it, and the lookup is tried again,
// after 250 ms growing to at most 5 s, until it succeeds.
//
// The balancer is the ClientConn's service config's: a resolver from
// NewResolverBuilder hands its addresses to whichever balancer that
// selects. The resolver DialOptions installs hands them to graylb's
// balancer only (see DialOptions).
func NewResolverBuilder(lb *graylb.LoadBalancer) resolver.Builder {
	return &resolverBuilder{lb: lb, ab: adapter.For(lb)}
}

type resolverBuilder struct {
	lb *graylb.LoadBalancer
	ab *adapter.Balancer // lb's adapter surface
	// guard: before the first list, check that the service config in
	// effect selects graylb's balancer, and refuse the ClientConn if not.
	guard bool
	// refused is the refusal of the ClientConn the builder's options made,
	// once given: a ClientConn that leaves idle mode builds its resolver
	// again, under the service config the refusal handed it (graylb's),
	// and must stay refused.
	refused atomic.Pointer[error]
}

// ErrOtherBalancer is wrapped by the error of every RPC of a ClientConn
// made with DialOptions whose service config selects a balancer other than
// graylb's.
var ErrOtherBalancer = errors.New("grpcctx: the ClientConn's service config selects a balancer other than graylb's")

// probeKey is the resolver.State attribute of the guard's first push; its
// value is a *balancerProbe.
type probeKey struct{}

// balancerProbe is marked by graylb's balancer when it receives the
// guard's first push (no address): the service config in effect selects
// it.
type balancerProbe struct{ seen atomic.Bool }

// refusedKey is the resolver.State attribute of a refused ClientConn; its
// value is a *refusal.
type refusedKey struct{}

// refusal is why the resolver refuses its ClientConn.
type refusal struct{ err error }

// guardBalancer checks that the service config the ClientConn applies
// without one from the resolver (its default service config: the last
// grpc.WithDefaultServiceConfig) selects graylb's balancer, by pushing a
// state without addresses that only graylb's balancer marks. grpc-go
// hands a resolver's state to the balancer before UpdateState returns.
// When another balancer is selected it never receives an address: the
// resolver provides graylb's service config with the refusal, so that
// graylb's balancer fails every RPC with it (or, when the ClientConn
// ignores resolvers' service configs, reports it as the resolver's error),
// and returns the refusal.
func guardBalancer(cc resolver.ClientConn, opts resolver.BuildOptions, service string) error {
	p := &balancerProbe{}
	_ = cc.UpdateState(resolver.State{Attributes: attributes.New(probeKey{}, p)})
	if p.seen.Load() {
		return nil
	}
	err := fmt.Errorf("%w, for %q: a grpc.WithDefaultServiceConfig after grpcctx.DialOptions (or a zrpc.WithDialOption "+
		"after gozero.ClientOptions) replaced graylb's, and another balancer would send prod calls to gray instances; "+
		`select graylb in it ("loadBalancingConfig":[{"graylb":{}}] beside its methodConfig, as grpcctx.ServiceConfig `+
		"does), or give it before them (graylb's then replaces it whole)", ErrOtherBalancer, service)
	refuse(cc, opts, err)
	return err
}

// refuse hands cc graylb's service config with the refusal err, so that
// graylb's balancer fails every RPC with it (unless cc ignores resolvers'
// service configs: then the resolver's build fails with it).
func refuse(cc resolver.ClientConn, opts resolver.BuildOptions, err error) {
	if !opts.DisableServiceConfig {
		_ = cc.UpdateState(resolver.State{ServiceConfig: cc.ParseServiceConfig(ServiceConfig),
			Attributes: attributes.New(refusedKey{}, &refusal{err: err})})
	}
}

func (b *resolverBuilder) Scheme() string { return Scheme }

func (b *resolverBuilder) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	if b.lb == nil {
		return nil, errors.New("grpcctx: resolver has no LoadBalancer")
	}
	service := strings.TrimPrefix(target.URL.Path, "/")
	if service == "" {
		service = target.URL.Host
	}
	if err := graylb.ValidateServiceName(service); err != nil {
		return nil, fmt.Errorf("grpcctx: target %q: %w", target.URL.String(), err)
	}
	r := &graylbResolver{cc: cc, lb: b.lb, ab: b.ab, service: service}
	if b.guard {
		err := error(nil)
		if p := b.refused.Load(); p != nil {
			err = *p
			refuse(cc, opts, err)
		} else if err = guardBalancer(cc, opts, service); err != nil {
			b.refused.CompareAndSwap(nil, &err)
		}
		if err != nil {
			if opts.DisableServiceConfig {
				// No way to hand RPCs the refusal: fail the build (a
				// dial that blocks returns it).
				return nil, err
			}
			r.closed = true // refused: it pushes nothing more
			return r, nil
		}
	}
	// The lookup runs apart: grpc-go builds the resolver on its way out of
	// idleness, inside the first RPC and before that RPC's deadline is
	// looked at, and ClientConn.Close waits for the build. A registry that
	// hangs would hold both for as long as it hangs.
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.start(ctx)
	return r, nil
}

// Lookup retries: a resolver whose first lookup failed (the registry
// could not be reached, or does not know the service yet) looks the
// service up again after lookupRetryFirst, then waits twice as long each
// time, at most lookupRetryMax, until a lookup succeeds or Close.
const (
	lookupRetryFirst = 250 * time.Millisecond
	lookupRetryMax   = 5 * time.Second
)

// start follows the service's list, then reads it: a change between the
// two is pushed by the watch, and the read is pushed only if no watched
// list came first (it could be the older one). A failure is the
// resolver's error (RPCs fail with it while no list came); a failed
// lookup is tried again (see lookupRetryFirst) unless the LoadBalancer is
// closed. Close cancels the read and the retries; a watch that was made
// after Close is stopped at once.
func (r *graylbResolver) start(ctx context.Context) {
	stop, err := r.ab.Cache().Watch(r.service, r.watched)
	for wait := lookupRetryFirst; err != nil; wait = min(2*wait, lookupRetryMax) {
		r.fail(err)
		if errors.Is(err, graylb.ErrClosed) {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		stop, err = r.ab.Cache().Watch(r.service, r.watched)
	}
	stopRules := r.ab.OnRulesChange(r.repush)
	stopAll := func() { stop(); stopRules() }
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		stopAll()
		return
	}
	r.stop = stopAll
	r.mu.Unlock()
	list, err := r.ab.Cache().Instances(ctx, r.service)
	if err != nil {
		r.fail(err)
		return
	}
	r.push(list, false)
}

// fail reports err as the resolver's error unless it was closed.
func (r *graylbResolver) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.cc.ReportError(fmt.Errorf("grpcctx: resolving %q: %w", r.service, err))
	}
}

type graylbResolver struct {
	cc      resolver.ClientConn
	lb      *graylb.LoadBalancer
	ab      *adapter.Balancer
	service string
	mu      sync.Mutex
	closed  bool
	last    []resolver.Address
	// fromWatch: a list from the watch was sent (the first read's list is
	// then older and is dropped).
	fromWatch bool
	stop      func()             // set under mu once the watch is made
	cancel    context.CancelFunc // ends the first read; nil for a refused resolver
}

// watched pushes a list the Cache hands over.
func (r *graylbResolver) watched(list []graylb.Instance) { r.push(list, true) }

// push sends list; the first read's list (fromWatch false) only when no
// watched list was sent before it.
func (r *graylbResolver) push(list []graylb.Instance, fromWatch bool) {
	addrs := make([]resolver.Address, len(list))
	for i, in := range list {
		addrs[i] = resolver.Address{
			Addr:       in.Addr(),
			Attributes: attributes.New(attrKey{}, &source{lb: r.lb, ab: r.ab, service: r.service, inst: in}),
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !fromWatch && r.fromWatch {
		return
	}
	r.fromWatch = r.fromWatch || fromWatch
	r.last = addrs
	r.update()
}

// repush sends the last list again after a rules change.
func (r *graylbResolver) repush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil {
		r.update()
	}
}

// update sends r.last; r.mu is held.
func (r *graylbResolver) update() {
	if r.closed {
		return
	}
	// The Cache hands over an empty list only when the service really
	// emptied (protection off, or still empty after its grace period):
	// pass it on, and RPCs fail with Unavailable.
	if err := r.cc.UpdateState(resolver.State{Addresses: r.last}); err != nil && len(r.last) > 0 {
		r.cc.ReportError(fmt.Errorf("grpcctx: %q: %w", r.service, err))
	}
}

func (r *graylbResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close stops following the service and cancels the first read; it does
// not wait for a watch the registry still holds up (that one is stopped
// when it returns).
func (r *graylbResolver) Close() {
	r.mu.Lock()
	r.closed = true
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	if r.cancel != nil {
		r.cancel()
	}
	if stop != nil {
		stop()
	}
}
