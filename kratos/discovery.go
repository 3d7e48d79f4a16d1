package graylbkratos

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"sync"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/graylb/graylb"
)

// The names of services and endpoints, as Kratos' own Nacos registry
// (contrib/registry/nacos) writes them, so that services registered by
// either are found by both:
//   - a Kratos instance registers each endpoint as an instance of its own,
//     under the service <name>.<scheme> ("user.http", "user.grpc"), with
//     the metadata "kind" set to the scheme and "version" to its version;
//   - a client dials discovery:///<name>.<scheme>, and each instance
//     found gives one endpoint, <kind>://<host>:<port>.
//
// An instance registered without a "kind" (a plain graylb service,
// registered with nacos.Register or graylb.Registry, reached over httpctx
// or grpcctx) gives both an http:// and a grpc:// endpoint at its address:
// Kratos' HTTP and gRPC clients each keep the endpoint of their scheme, so
// a Kratos client reaches it by its plain name over the protocol it
// speaks. (Kratos' own registry assumes grpc there.)
const (
	// KindKey is the metadata key of an instance's scheme.
	KindKey = "kind"
	// VersionKey is the metadata key of an instance's version.
	VersionKey = graylb.DefaultVersionKey
)

// Discovery is a Kratos registry.Discovery over a graylb Supplier: the
// nacos package's Supplier in production (so a Kratos service on Nacos
// needs nothing else), graylb.Registry in tests and examples. It lists a
// service's usable instances (healthy, enabled, of a positive weight) as
// ServiceInstances: ID host:port, Name the service, Version and Metadata
// the instance's (a copy; "weight" set to its registry weight, which
// graylb's Selector reads), one endpoint per scheme (see KindKey).
type Discovery struct {
	s graylb.Supplier
}

// NewDiscovery returns a Discovery over s.
func NewDiscovery(s graylb.Supplier) *Discovery { return &Discovery{s: s} }

// GetService returns the instances of service; none, without an error,
// for a service the Supplier does not know.
func (d *Discovery) GetService(ctx context.Context, service string) ([]*registry.ServiceInstance, error) {
	list, err := d.s.Instances(ctx, service)
	if errors.Is(err, graylb.ErrUnknownService) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return serviceInstances(list), nil
}

// Watch returns a watcher of service, as Kratos' registries give: its
// first Next returns the current instances (once there is at least one),
// each later Next blocks until they change and returns the new list; Next
// returns an error wrapping context.Canceled once Stop was called, or
// ctx's error once ctx ended.
func (d *Discovery) Watch(ctx context.Context, service string) (registry.Watcher, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	w := &watcher{ch: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(ctx)
	stop, err := d.s.Watch(service, w.update)
	if err != nil {
		w.cancel()
		return nil, err
	}
	w.stop = stop
	list, err := d.s.Instances(ctx, service)
	switch {
	case errors.Is(err, graylb.ErrUnknownService):
	case err != nil:
		w.Stop()
		return nil, err
	default:
		w.seed(list)
	}
	return w, nil
}

type watcher struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan struct{} // a new list is waiting (capacity 1)

	mu      sync.Mutex
	list    []graylb.Instance
	fresh   bool // list not returned yet
	seen    bool // a list (not the seed) or a Next's answer happened
	updated bool // the Supplier reported a list, empty ones included
	stop    func()
	closed  sync.Once
}

// seed sets the list found at the start, unless an update came first.
func (w *watcher) seed(list []graylb.Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen || w.updated || len(list) == 0 {
		return // an update is newer than the list found at the start
	}
	w.list, w.fresh = list, true
	w.signal()
}

func (w *watcher) update(list []graylb.Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.updated = true
	if !w.seen && len(list) == 0 {
		// Nothing to report yet: the first Next waits for instances, and
		// does not return a seed they left.
		w.list, w.fresh = nil, false
		return
	}
	w.seen = true
	w.list, w.fresh = list, true
	w.signal()
}

func (w *watcher) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Next returns the instances once they are new to this watcher.
func (w *watcher) Next() ([]*registry.ServiceInstance, error) {
	for {
		w.mu.Lock()
		if w.fresh && w.ctx.Err() == nil {
			list := w.list
			w.fresh, w.seen = false, true
			w.mu.Unlock()
			return serviceInstances(list), nil
		}
		w.mu.Unlock()
		select {
		case <-w.ctx.Done():
			return nil, w.ctx.Err()
		case <-w.ch:
		}
	}
}

// Stop ends the watch: a blocked Next returns.
func (w *watcher) Stop() error {
	w.closed.Do(func() {
		w.cancel()
		if w.stop != nil {
			w.stop()
		}
	})
	return nil
}

// serviceInstances converts a Supplier's list.
func serviceInstances(list []graylb.Instance) []*registry.ServiceInstance {
	out := make([]*registry.ServiceInstance, 0, len(list))
	for _, in := range list {
		if !in.Usable() {
			continue
		}
		md := make(map[string]string, len(in.Metadata)+1)
		for k, v := range in.Metadata {
			md[k] = v
		}
		md[weightKey] = strconv.FormatFloat(in.Weight, 'f', -1, 64)
		si := &registry.ServiceInstance{
			ID:       in.Addr(),
			Name:     in.Service,
			Version:  in.Metadata[VersionKey],
			Metadata: md,
		}
		addr := in.Addr()
		if kind := in.Metadata[KindKey]; kind != "" {
			si.Endpoints = []string{kind + "://" + addr}
		} else {
			si.Endpoints = []string{"http://" + addr, "grpc://" + addr}
		}
		out = append(out, si)
	}
	return out
}

// endpoint is one endpoint of a Kratos ServiceInstance.
type endpoint struct {
	scheme string
	host   string
	port   int
}

// endpointsOf parses si's endpoints (scheme://host:port, a query such as
// ?isSecure=true allowed).
func endpointsOf(si *registry.ServiceInstance) ([]endpoint, error) {
	if si == nil {
		return nil, errors.New("graylbkratos: nil service instance")
	}
	if si.Name == "" {
		return nil, errors.New("graylbkratos: service instance without a name")
	}
	if len(si.Endpoints) == 0 {
		return nil, errors.New("graylbkratos: service instance " + strconv.Quote(si.Name) + " without an endpoint")
	}
	out := make([]endpoint, 0, len(si.Endpoints))
	for _, e := range si.Endpoints {
		u, err := url.Parse(e)
		if err != nil {
			return nil, errors.New("graylbkratos: endpoint " + strconv.Quote(e) + ": " + err.Error())
		}
		host, port, ok := splitHostPort(u.Host)
		if u.Scheme == "" || !ok {
			return nil, errors.New("graylbkratos: endpoint " + strconv.Quote(e) + ": want scheme://host:port")
		}
		out = append(out, endpoint{scheme: u.Scheme, host: host, port: port})
	}
	return out, nil
}

func splitHostPort(addr string) (string, int, bool) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", 0, false
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, false
	}
	return host, port, true
}

var _ registry.Discovery = (*Discovery)(nil)
