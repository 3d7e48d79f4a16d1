package graylbkratos

import (
	"context"
	"errors"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/graylb/graylb"
)

// InstanceRegistry is a registry graylb instances are registered in:
// graylb.Registry is one. (For Nacos, the kratos/nacos package's Registrar
// registers through the nacos package, with its graceful deregistration.)
type InstanceRegistry interface {
	Register(graylb.Instance) error
	Deregister(service, addr string) error
}

// Registrar is a Kratos registry.Registrar over an InstanceRegistry, for
// tests and examples without Nacos (kratos.Registrar(graylbkratos.NewRegistrar(reg))).
// It registers each endpoint of a ServiceInstance as one instance, named
// as Kratos' own Nacos registry names them (see KindKey): service
// <name>.<scheme>, metadata the ServiceInstance's plus "kind" (the scheme)
// and "version" (its Version, when set); the gray flag is the Metadata's
// gray key, as graylb reads it.
type Registrar struct {
	r InstanceRegistry
}

// NewRegistrar returns a Registrar over r.
func NewRegistrar(r InstanceRegistry) *Registrar { return &Registrar{r: r} }

// Register registers every endpoint of si, or none: an endpoint that
// cannot be registered deregisters those registered before it.
func (g *Registrar) Register(_ context.Context, si *registry.ServiceInstance) error {
	list, err := Instances(si)
	if err != nil {
		return err
	}
	for i, in := range list {
		if err := g.r.Register(in); err != nil {
			for _, done := range list[:i] {
				_ = g.r.Deregister(done.Service, done.Addr())
			}
			return err
		}
	}
	return nil
}

// Deregister deregisters every endpoint of si.
func (g *Registrar) Deregister(_ context.Context, si *registry.ServiceInstance) error {
	list, err := Instances(si)
	if err != nil {
		return err
	}
	var errs []error
	for _, in := range list {
		errs = append(errs, g.r.Deregister(in.Service, in.Addr()))
	}
	return errors.Join(errs...)
}

// Instances returns the graylb instances si registers as: one per
// endpoint, of service <si.Name>.<scheme>, with si's Metadata plus "kind"
// (the scheme) and "version" (si.Version, when set). An endpoint must be
// scheme://host:port.
func Instances(si *registry.ServiceInstance) ([]graylb.Instance, error) {
	eps, err := endpointsOf(si)
	if err != nil {
		return nil, err
	}
	out := make([]graylb.Instance, 0, len(eps))
	for _, e := range eps {
		md := make(map[string]string, len(si.Metadata)+2)
		for k, v := range si.Metadata {
			md[k] = v
		}
		md[KindKey] = e.scheme
		if si.Version != "" {
			md[VersionKey] = si.Version
		}
		in := graylb.NewInstance(si.Name+"."+e.scheme, e.host, e.port, md)
		if err := in.Validate(); err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

var _ registry.Registrar = (*Registrar)(nil)
