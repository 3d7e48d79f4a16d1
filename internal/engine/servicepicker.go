package engine

import (
	"context"
	"sync/atomic"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
)

// ServicePicker is graylb.ServicePicker.
type ServicePicker struct {
	servicePickerFields
	_ [cacheline.Size - unsafe.Sizeof(servicePickerFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// servicePickerFields are the fields of a ServicePicker, which pads them to whole cache
// lines.
type servicePickerFields struct {
	lb   *LoadBalancer
	name string
	s    atomic.Pointer[service] // the routed service, once a pick found it
}

// Service is graylb.LoadBalancer.Service.
func (lb *LoadBalancer) Service(service string) (*ServicePicker, error) {
	if err := ValidateServiceName(service); err != nil {
		return nil, err
	}
	return &ServicePicker{servicePickerFields: servicePickerFields{lb: lb, name: service}}, nil
}

// Name returns the service's name.
func (p *ServicePicker) Name() string { return p.name }

// Pick returns an instance of the service for the request in ctx, with the
// errors of LoadBalancer.Pick.
func (p *ServicePicker) Pick(ctx context.Context) (Instance, error) {
	in, err := p.pick(ctx)
	if err != nil {
		return Instance{}, err
	}
	return *in, nil
}

func (p *ServicePicker) pick(ctx context.Context) (*Instance, error) {
	if s := p.s.Load(); s != nil && ctx != nil {
		return s.tree.Load().pick(ctx, p.lb.handler, p.lb.observer)
	}
	in, err := p.lb.PickRef(ctx, p.name)
	if s := p.lb.services.Load().get(p.name); s != nil {
		p.s.Store(s) // routed from now on: services stay once added
	}
	return in, err
}
