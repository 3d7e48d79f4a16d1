// Package kratosnacos registers Kratos services in Nacos through graylb's
// nacos package: a Kratos registry.Registrar (kratos.Registrar(...)) whose
// instances graylb's Discovery (graylbkratos.NewDiscovery over a
// nacos.Supplier) and Kratos' own Nacos registry both find.
//
// Each endpoint of a ServiceInstance is an instance of its own, under the
// service <name>.<scheme> ("user.http", "user.grpc"), with the instance's
// metadata plus "kind" (the scheme) and "version" (its Version), as Kratos'
// contrib/registry/nacos registers them. Its gray flag is the metadata's
// gray key ("gray" unless WithGrayKey), else the environment (GRAYLB_GRAY,
// as nacos.Register reads it).
//
// A nacos Client holds one instance per service: a process registers its
// own instance (as a Kratos App does), so the Registrar may share the
// Supplier's Client (WithNacosOptions(nacos.WithClient(c))).
//
// Deregister is graceful, as nacos.Registration.Deregister is: it takes
// every endpoint off Nacos, then waits until clients had the time to see
// it go (nacos.WithDrainWait, 2 s by default) within the ctx Kratos gives it
// (kratos.RegistrarTimeout, 10 s by default), before Kratos stops the
// servers. Every call to the server, Register's and Deregister's, is
// bounded by the ctx Kratos gives it.
package kratosnacos

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	"github.com/graylb/graylb/nacos"
)

// Registrar registers Kratos ServiceInstances in Nacos. It is safe for
// concurrent use.
type Registrar struct {
	opts    []nacos.Option
	grayKey string

	mu   sync.Mutex
	regs map[string][]*nacos.Registration // by instanceKey
}

// Option configures a Registrar.
type Option func(*Registrar)

// WithGrayKey names the metadata key of the gray flag (default "gray"),
// as graylb.WithGrayKey names it for the LoadBalancers that read it.
func WithGrayKey(key string) Option { return func(r *Registrar) { r.grayKey = key } }

// WithNacosOptions sets the options of the nacos package every
// registration uses: the Client (nacos.WithClient, to share the
// Supplier's connection), or the servers, namespace, group, credentials,
// drain wait.
func WithNacosOptions(opts ...nacos.Option) Option {
	return func(r *Registrar) { r.opts = append(r.opts, opts...) }
}

// NewRegistrar returns a Registrar.
func NewRegistrar(opts ...Option) *Registrar {
	r := &Registrar{grayKey: graylb.DefaultGrayKey, regs: map[string][]*nacos.Registration{}}
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	return r
}

// instanceKey names a ServiceInstance's registration.
func instanceKey(si *registry.ServiceInstance) string {
	return si.Name + "\x00" + si.ID + "\x00" + strings.Join(si.Endpoints, "\x00")
}

// Register registers every endpoint of si, or none: when one fails, those
// registered before it are removed again.
func (r *Registrar) Register(ctx context.Context, si *registry.ServiceInstance) error {
	list, err := graylbkratos.Instances(si)
	if err != nil {
		return err
	}
	key := instanceKey(si)
	r.mu.Lock()
	_, dup := r.regs[key]
	r.mu.Unlock()
	if dup {
		return errors.New("kratosnacos: " + si.Name + " " + si.ID + " is registered already")
	}
	regs := make([]*nacos.Registration, 0, len(list))
	for _, in := range list {
		svc := nacos.Service{Name: in.Service, Host: in.Host, Port: in.Port, Version: in.Metadata[graylbkratos.VersionKey],
			Metadata: in.Metadata, GrayKey: r.grayKey}
		if v, ok := in.Metadata[r.grayKey]; ok {
			gray := graylb.IsGray(v)
			svc.Gray = &gray
		}
		reg, err := nacos.Register(ctx, svc, r.opts...)
		if err != nil {
			for _, done := range regs {
				done.CloseContext(ctx)
			}
			return err
		}
		regs = append(regs, reg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.regs[key]; dup { // a concurrent Register of the same instance won
		for _, reg := range regs {
			reg.CloseContext(ctx)
		}
		return errors.New("kratosnacos: " + si.Name + " " + si.ID + " is registered already")
	}
	r.regs[key] = regs
	return nil
}

// Deregister takes every endpoint of si off Nacos at once and waits the
// drain wait (see the package doc) within ctx. An instance this Registrar
// did not register is left alone (nil).
func (r *Registrar) Deregister(ctx context.Context, si *registry.ServiceInstance) error {
	if si == nil {
		return errors.New("kratosnacos: nil service instance")
	}
	key := instanceKey(si)
	r.mu.Lock()
	regs := r.regs[key]
	delete(r.regs, key)
	r.mu.Unlock()
	errs := make([]error, len(regs))
	var wg sync.WaitGroup
	for i, reg := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = errors.Join(reg.Deregister(ctx), reg.CloseContext(ctx))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

var _ registry.Registrar = (*Registrar)(nil)
