package engine

import (
	"context"
	"errors"
	"fmt"
)

// maxLookups bounds the lookups a LoadBalancer has in flight, so that
// memory stays bounded whatever names callers send while the Supplier
// hangs: a pick that would start one more waits for one to end, within
// its ctx.
const maxLookups = 1024

// lookup is the first lookup of a service in flight: one per service,
// created under LoadBalancer.mu and done outside it, on a goroutine of its
// own under the LoadBalancer's lifetime context, so that no lock is held
// while the Supplier goes to the network. Every pick that finds the service
// not routed yet waits on it as long as its own context allows.
type lookup struct {
	done chan struct{} // closed once s and err are set
	s    *service
	err  error
}

// addService returns the routed service named name, looking it up first
// if it is not routed yet. It returns when the lookup ends, ctx ends (an
// error wrapping ctx.Err()) or the LoadBalancer closes (ErrClosed),
// whichever comes first; a lookup a caller gave up on goes on for the
// callers that come later, until the LoadBalancer closes. Starting a
// lookup takes one of maxLookups slots, waited for within ctx.
func (lb *LoadBalancer) addService(ctx context.Context, name string) (*service, error) {
	if err := ValidateServiceName(name); err != nil {
		return nil, err
	}
	slot := false // holds one of lb.lookupSlots
	for {
		lb.mu.Lock()
		if lb.closed.Load() {
			lb.mu.Unlock()
			if slot {
				<-lb.lookupSlots
			}
			return nil, ErrClosed
		}
		if s := lb.services.Load().get(name); s != nil {
			lb.mu.Unlock()
			if slot {
				<-lb.lookupSlots
			}
			return s, nil
		}
		l := lb.lookups[name]
		if l == nil && slot {
			l = &lookup{done: make(chan struct{})}
			if lb.lookups == nil {
				lb.lookups = map[string]*lookup{}
			}
			lb.lookups[name] = l
			go lb.runLookup(name, l) // gives the slot back
			slot = false
		}
		lb.mu.Unlock()
		if slot { // another caller started the lookup meanwhile
			<-lb.lookupSlots
		}
		if l != nil {
			return lb.await(ctx, name, l)
		}
		// A slot first, outside mu: waiting for one delays nobody else.
		select {
		case lb.lookupSlots <- struct{}{}:
			slot = true
		case <-ctx.Done():
			return nil, fmt.Errorf("graylb: instances of %q: %w", name, ctx.Err())
		case <-lb.life.Done():
			return nil, ErrClosed
		}
	}
}

// await waits for l, ctx or Close, whichever comes first.
func (lb *LoadBalancer) await(ctx context.Context, name string, l *lookup) (*service, error) {
	select {
	case <-l.done:
		return l.s, l.err
	case <-ctx.Done():
	case <-lb.life.Done():
	}
	// What is ready wins: both may be.
	select {
	case <-l.done:
		return l.s, l.err
	default:
	}
	if lb.closed.Load() {
		return nil, ErrClosed
	}
	return nil, fmt.Errorf("graylb: instances of %q: %w", name, ctx.Err())
}

// runLookup looks name up under the LoadBalancer's lifetime context and
// publishes the service unless the LoadBalancer closed meanwhile.
func (lb *LoadBalancer) runLookup(name string, l *lookup) {
	s, err := lb.lookUp(lb.life, name)
	lb.mu.Lock()
	delete(lb.lookups, name)
	closed := lb.closed.Load()
	if err == nil && !s.unlisted && !closed {
		lb.services.Store(lb.services.Load().with(s))
	}
	lb.mu.Unlock()
	if closed {
		if err == nil {
			s.release()
		}
		s, err = nil, ErrClosed
	} else if err == nil && !s.unlisted {
		// A SetRules that ran between the build and the publication above
		// did not see s in the map; it stored its rules first, so they are
		// visible here (both sides use sequentially consistent atomics).
		s.mu.Lock()
		if s.tree.Load().rules != lb.rules.Load() {
			lb.rebuild(s, s.list)
		}
		s.mu.Unlock()
	}
	l.s, l.err = s, err
	close(l.done)
	<-lb.lookupSlots
}

// lookUp builds the routing of service name from the Cache: a service
// kept and watched when it has instances, a throw-away one (unlisted) when
// it has none.
func (lb *LoadBalancer) lookUp(ctx context.Context, name string) (*service, error) {
	list, err := lb.cache.Instances(ctx, name)
	if errors.Is(err, ErrNoInstance) || (err == nil && len(list) == 0) {
		// Nothing to route to, and maybe a name nothing was ever
		// registered under: keep nothing for it (memory stays bounded
		// whatever names callers send); the pick fails with the
		// request's kind, and a later pick asks again.
		if err == nil {
			lb.cache.forgetEmpty(name)
		}
		s := &service{serviceHot: serviceHot{name: name, unlisted: true}}
		s.tree.Store(lb.emptyTree(name))
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	s := &service{serviceHot: serviceHot{name: name}}
	if lb.keepStats {
		s.health = newHealth(name, lb.outlier, func() { lb.healthChanged(s) })
	}
	s.mu.Lock()
	lb.rebuild(s, list)
	s.mu.Unlock()
	stop, err := lb.cache.Watch(name, func(l []Instance) {
		s.mu.Lock()
		lb.rebuild(s, l)
		s.mu.Unlock()
	})
	if err != nil {
		s.release()
		return nil, err
	}
	s.stop = stop
	// The cache may have changed between Instances and Watch. Read under
	// s.mu: the Cache stores a list before it tells the watchers, so a
	// list read here is never older than one a watcher built meanwhile.
	s.mu.Lock()
	if l, err := lb.cache.Instances(ctx, name); err == nil {
		lb.rebuild(s, l)
	}
	s.mu.Unlock()
	if lb.testHookServiceBuilt != nil {
		lb.testHookServiceBuilt()
	}
	return s, nil
}

// release stops following s's list and its Stats.
func (s *service) release() {
	if s.stop != nil {
		s.stop()
	}
	if s.health != nil {
		s.health.close()
	}
}
