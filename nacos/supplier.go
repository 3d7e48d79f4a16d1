// Package nacos backs graylb with a Nacos registry through nacos-sdk-go/v2:
// a graylb.Supplier over the naming service, a graylb.RuleSource over
// Nacos config, and a helper that registers the running service with its
// gray and version metadata.
//
//	sup, _ := nacos.NewSupplier(nacos.WithServers("127.0.0.1:8848"))
//	lb, _ := graylb.New(sup) // the graylb.Cache over it keeps the last good list
//
// graylb never calls the SDK's selection on the pick path: the SDK
// rebuilds and sorts its host list on every call and truncates weights
// below 1 to zero.
package nacos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// namingClient is the part of the SDK's naming client the Supplier uses.
type namingClient interface {
	SelectAllInstances(param vo.SelectAllInstancesParam) ([]model.Instance, error)
	Subscribe(param *vo.SubscribeParam) error
	Unsubscribe(param *vo.SubscribeParam) error
}

// Supplier is a graylb.Supplier over Nacos naming. It keeps one SDK
// subscription per service and fans it out to its watchers (unsubscribing
// one SDK callback has removed its siblings, nacos-sdk-go #835), and hands
// over only healthy, enabled, weight > 0 instances (the SDK's callbacks hand
// over raw hosts). Put a graylb.Cache over it (graylb.New does) for the
// last good list and empty-update protection.
type Supplier struct {
	client   namingClient
	closeFn  func()
	group    string
	clusters []string
	logger   *slog.Logger

	mu     sync.Mutex
	closed bool
	subs   map[string]*subscription
}

type subscription struct {
	param    *vo.SubscribeParam // the same pointer for Subscribe and Unsubscribe
	watchers map[uint64]func([]graylb.Instance)
	next     uint64
	mu       sync.Mutex // serialises deliveries
}

// NewSupplier returns a Supplier, building an SDK naming client from the
// options unless WithNamingClient gives one.
func NewSupplier(opts ...Option) (*Supplier, error) {
	c := newConfig(opts)
	nc, owned, err := c.namingClient()
	if err != nil {
		return nil, err
	}
	s := newSupplier(nc, c)
	if owned {
		s.closeFn = nc.CloseClient
		waitConnected(nc, c.timeout)
	}
	return s, nil
}

// waitConnected gives a new client up to timeout (at most 3s) to connect,
// so the first subscriptions go out at once. When Nacos is down it returns
// after that and the Supplier serves the SDK's disk cache.
func waitConnected(nc interface{ ServerHealthy() bool }, timeout time.Duration) {
	deadline := time.Now().Add(min(timeout, 3*time.Second))
	for !nc.ServerHealthy() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

func newSupplier(nc namingClient, c *config) *Supplier {
	return &Supplier{client: nc, group: c.group, clusters: c.clusters, logger: c.logger, subs: map[string]*subscription{}}
}

// Instances queries the instances of service (from the SDK's cache when it
// has the service, which includes its disk cache at start).
func (s *Supplier) Instances(ctx context.Context, service string) ([]graylb.Instance, error) {
	if err := graylb.ValidateServiceName(service); err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, graylb.ErrClosed
	}
	type result struct {
		hosts []model.Instance
		err   error
	}
	done := make(chan result, 1)
	go func() {
		h, err := s.client.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: service, GroupName: s.group, Clusters: s.clusters})
		done <- result{h, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("nacos: instances of %q: %w", service, r.err)
		}
		return convert(service, r.hosts), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("nacos: instances of %q: %w", service, ctx.Err())
	}
}

// Watch subscribes to service (once per service) and calls fn with each
// pushed list.
func (s *Supplier) Watch(service string, fn func([]graylb.Instance)) (func(), error) {
	if err := graylb.ValidateServiceName(service); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, errors.New("nacos: nil watch function")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, graylb.ErrClosed
	}
	sub := s.subs[service]
	if sub == nil {
		sub = &subscription{watchers: map[uint64]func([]graylb.Instance){}}
		sub.param = &vo.SubscribeParam{
			ServiceName: service, GroupName: s.group, Clusters: s.clusters,
			SubscribeCallback: func(hosts []model.Instance, err error) { s.deliver(service, sub, hosts, err) },
		}
		if err := s.client.Subscribe(sub.param); err != nil {
			// The SDK has registered the callback and cached the
			// subscription for redo: it subscribes again once connected.
			s.logger.Warn("nacos: subscribe failed; the SDK retries when connected", "service", service, "err", firstLine(err))
		}
		s.subs[service] = sub
	}
	sub.mu.Lock()
	id := sub.next
	sub.next++
	sub.watchers[id] = fn
	sub.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.unwatch(service, sub, id) }) }, nil
}

func (s *Supplier) deliver(service string, sub *subscription, hosts []model.Instance, err error) {
	if err != nil {
		s.logger.Warn("nacos: push failed; keeping the last list", "service", service, "err", firstLine(err))
		return
	}
	list := convert(service, hosts)
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, fn := range sub.watchers {
		fn(list)
	}
}

func (s *Supplier) unwatch(service string, sub *subscription, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub.mu.Lock()
	delete(sub.watchers, id)
	empty := len(sub.watchers) == 0
	sub.mu.Unlock()
	if empty && s.subs[service] == sub {
		delete(s.subs, service)
		if err := s.client.Unsubscribe(sub.param); err != nil {
			s.logger.Warn("nacos: unsubscribe failed", "service", service, "err", firstLine(err))
		}
	}
}

// Close unsubscribes every service and closes the SDK client if the
// Supplier built it.
func (s *Supplier) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for service, sub := range subs {
		if err := s.client.Unsubscribe(sub.param); err != nil {
			s.logger.Warn("nacos: unsubscribe failed", "service", service, "err", firstLine(err))
		}
	}
	if s.closeFn != nil {
		s.closeFn()
	}
	return nil
}

// convert keeps the usable hosts (healthy, enabled, weight > 0) as graylb
// instances.
func convert(service string, hosts []model.Instance) []graylb.Instance {
	out := make([]graylb.Instance, 0, len(hosts))
	for _, h := range hosts {
		in := graylb.Instance{
			Service: service, Host: h.Ip, Port: int(h.Port), Weight: h.Weight,
			Healthy: h.Healthy, Enabled: h.Enable, Cluster: h.ClusterName, Metadata: h.Metadata,
		}
		if in.Usable() && in.Port > 0 {
			out = append(out, in)
		}
	}
	return out
}

var _ graylb.Supplier = (*Supplier)(nil)

// firstLine drops the stack trace the SDK's errors carry.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return msg[:i]
	}
	return msg
}
