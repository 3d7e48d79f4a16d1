package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/graylb/graylb/internal/fanout"
)

// Registry is graylb.Registry.
type Registry struct {
	mu       sync.Mutex
	services map[string]*regService
}

type regService struct {
	known     bool                // an instance was ever registered
	instances map[string]Instance // by addr
	seq       uint64
	watchers  fanout.Set[func([]Instance)]

	notifyMu  sync.Mutex
	delivered uint64
}

// NewRegistry is graylb.NewRegistry.
func NewRegistry() *Registry { return &Registry{services: map[string]*regService{}} }

func (r *Registry) svc(service string) *regService {
	s := r.services[service]
	if s == nil {
		s = &regService{instances: map[string]Instance{}}
		r.services[service] = s
	}
	return s
}

// Register adds or replaces an instance. Its metadata map is copied.
func (r *Registry) Register(inst Instance) error {
	if err := inst.Validate(); err != nil {
		return err
	}
	inst.Metadata = maps.Clone(inst.Metadata)
	r.mu.Lock()
	s := r.svc(inst.Service)
	s.known = true
	s.instances[inst.Addr()] = inst
	r.changed(inst.Service, s)
	return nil
}

// Deregister removes the instance of service at addr (host:port).
func (r *Registry) Deregister(service, addr string) error {
	return r.mutate(service, addr, func(s *regService) { delete(s.instances, addr) })
}

// Update changes the instance of service at addr in place; fn gets a copy
// whose Metadata may be modified. Service, Host and Port cannot change.
func (r *Registry) Update(service, addr string, fn func(*Instance)) error {
	if fn == nil {
		return errors.New("graylb: nil update function")
	}
	var verr error
	err := r.mutate(service, addr, func(s *regService) {
		in := s.instances[addr]
		in.Metadata = maps.Clone(in.Metadata)
		if in.Metadata == nil {
			in.Metadata = map[string]string{}
		}
		fn(&in)
		in.Service, in.Host, in.Port = s.instances[addr].Service, s.instances[addr].Host, s.instances[addr].Port
		if verr = in.Validate(); verr == nil {
			s.instances[addr] = in
		}
	})
	if err != nil {
		return err
	}
	return verr
}

// SetMetadata sets one metadata key of the instance at addr.
func (r *Registry) SetMetadata(service, addr, key, value string) error {
	return r.Update(service, addr, func(in *Instance) { in.Metadata[key] = value })
}

func (r *Registry) mutate(service, addr string, fn func(*regService)) error {
	if err := ValidateServiceName(service); err != nil {
		return err
	}
	r.mu.Lock()
	s := r.services[service]
	if s == nil || !s.known {
		r.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownService, service)
	}
	if _, ok := s.instances[addr]; !ok {
		r.mu.Unlock()
		return fmt.Errorf("%w: %q has no instance at %q", ErrInvalidInstance, service, addr)
	}
	fn(s)
	r.changed(service, s)
	return nil
}

// changed is called with r.mu held; it releases it and notifies watchers.
func (r *Registry) changed(service string, s *regService) {
	s.seq++
	seq := s.seq
	watchers := s.watchers.Snapshot()
	if len(watchers) == 0 {
		r.mu.Unlock()
		return
	}
	list := s.list()
	r.mu.Unlock()

	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if seq <= s.delivered { // a newer list was delivered already
		return
	}
	s.delivered = seq
	for _, fn := range watchers {
		fn(list)
	}
}

// list returns the instances sorted by address.
func (s *regService) list() []Instance {
	addrs := make([]string, 0, len(s.instances))
	for a := range s.instances {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	out := make([]Instance, len(addrs))
	for i, a := range addrs {
		out[i] = s.instances[a]
	}
	return out
}

// Instances returns the instances of service. A service that never had an
// instance gives ErrUnknownService; one whose instances all left gives an
// empty list.
func (r *Registry) Instances(ctx context.Context, service string) ([]Instance, error) {
	if err := ValidateServiceName(service); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.services[service]
	if s == nil || !s.known {
		return nil, fmt.Errorf("%w: %q", ErrUnknownService, service)
	}
	return s.list(), nil
}

// Watch calls fn after each change of service, until stop is called. A
// service may be watched before its first instance registers.
func (r *Registry) Watch(service string, fn func([]Instance)) (func(), error) {
	if err := ValidateServiceName(service); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, errors.New("graylb: nil watch function")
	}
	r.mu.Lock()
	s := r.svc(service)
	remove := s.watchers.Add(fn)
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			remove()
			// A service watched but never registered leaves no trace, so
			// watching names from untrusted input keeps memory bounded.
			if !s.known && s.watchers.Len() == 0 && r.services[service] == s {
				delete(r.services, service)
			}
			r.mu.Unlock()
		})
	}, nil
}
