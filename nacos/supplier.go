// Package nacos backs graylb with a Nacos registry through nacos-sdk-go/v2:
// a graylb.Supplier over the naming service, a graylb.RuleSource over
// Nacos config, and a helper that registers the running service with its
// gray and version metadata.
//
//	sup, _ := nacos.NewSupplier(nacos.WithServers("127.0.0.1:8848"))
//	lb, _ := graylb.New(sup) // the graylb.Cache over it keeps the last good list
//
// Several of them in one process share one connection through a Client:
//
//	cl, _ := nacos.NewClient(ctx, nacos.WithServers("10.0.0.1:8848"))
//	sup, _ := nacos.NewSupplier(nacos.WithClient(cl))
//	rules, _ := nacos.NewRuleSource("", nacos.WithClient(cl))
//
// The SDK's cache and log folders default to os.UserCacheDir()/graylb/nacos
// (cache/ and log/), its log level to error; the lists go to a folder of
// graylb's own inside the cache folder (see WithCacheDir).
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
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// naming is what the Supplier needs from a naming client.
type naming interface {
	// query reads the service's instances from the server.
	query(ctx context.Context, service, group string, clusters []string) ([]model.Instance, error)
	// cached returns the last list the client holds for the service.
	cached(service, group string, clusters []string) ([]model.Instance, bool)
	// subscribe and unsubscribe change which callbacks get the service's
	// pushes; they tell the server without waiting for it (the Supplier
	// calls them under its lock).
	subscribe(p *vo.SubscribeParam) error
	unsubscribe(p *vo.SubscribeParam) error
	healthy() bool
	RefillUntil() time.Time
}

// Supplier is a graylb.Supplier over Nacos naming.
//
// It routes only on lists the server sent over the Client's connection:
// its first list of a service comes from a query to the server, changes
// from the server's pushes, and every WithReconcile period it reads each
// subscribed service from the server again and hands the list over when it
// differs (a lost push, or one the SDK dropped, cannot leave a list stale
// for longer). While the Client's connection is down it reads each
// subscribed service over the server's HTTP API every 250 ms and hands
// over a list that changed, so that what changed during an outage routes
// as soon as the server answers again, not when the SDK's reconnection
// back-off (up to 5 s) next tries (see recover.go). Only while the server
// cannot be reached does Instances fall back to the SDK's disk cache,
// which holds lists the server sent earlier.
//
// It keeps one subscription per service and fans it out to its watchers
// (unsubscribing one SDK callback has removed its siblings, nacos-sdk-go
// #835), and hands over only valid (see graylb.Instance.Validate),
// healthy, enabled, weight > 0 instances; invalid ones are dropped with a
// log line. It reports refills (RefillUntil, see graylb.Supplier) through its Client. Put a
// graylb.Cache over it (graylb.New does) for the last good list and the
// empty-update and refill protection.
type Supplier struct {
	client    naming
	closeFn   func()
	group     string
	clusters  []string
	logger    *slog.Logger
	reconcile time.Duration

	mu     sync.Mutex
	closed bool
	subs   map[string]*subscription
	stop   chan struct{}
	done   sync.WaitGroup
	// life ends with Close: reconciliations' queries run under it.
	life    context.Context
	endLife context.CancelFunc
}

type subscription struct {
	param    *vo.SubscribeParam // the same pointer for Subscribe and Unsubscribe
	watchers adapter.Watchers[func([]graylb.Instance)]
	mu       sync.Mutex // serialises deliveries
	last     []string   // keys of the last list handed over
	version  uint64     // lists handed over (pushes, reconciliations, reads over HTTP)
}

// NewSupplier returns a Supplier on the Client given by WithClient, or on
// a Client of its own built from the options (Close then closes it; it
// waits for the connection as NewClient does, with a background context).
// WithNamingClient uses an SDK naming client instead (see its caveat).
func NewSupplier(opts ...Option) (*Supplier, error) {
	c := newConfig(opts)
	var n naming
	var closeFn func()
	switch {
	case c.client != nil:
		n = c.client
	case c.naming != nil:
		n = newSDKNaming(c.naming, c.refill, c.logger)
		closeFn = n.(*sdkNaming).close
	default:
		cl, err := NewClient(context.Background(), opts...)
		if err != nil {
			return nil, err
		}
		n, closeFn = cl, func() { cl.Close() }
	}
	s := newSupplier(n, c)
	s.closeFn = closeFn
	return s, nil
}

func newSupplier(n naming, c *config) *Supplier {
	s := &Supplier{client: n, group: c.group, clusters: c.clusters, logger: c.logger, reconcile: c.reconcile,
		subs: map[string]*subscription{}, stop: make(chan struct{})}
	s.life, s.endLife = context.WithCancel(context.Background())
	if s.reconcile > 0 {
		s.done.Add(1)
		go s.reconcileLoop()
	}
	if l, ok := n.(httpListing); ok && c.recoverEvery > 0 {
		s.done.Add(1)
		go s.recoverLoop(l, c.recoverEvery, c.recoverPatience, c.recoverSlow)
	}
	return s
}

// RefillUntil reports the Client's refill window (see Client.RefillUntil).
func (s *Supplier) RefillUntil() time.Time { return s.client.RefillUntil() }

// Instances reads the instances of service from the server. While the
// server cannot be reached it serves the list the SDK holds (pushed by the
// server earlier, or its disk cache at start), and without one fails at
// once with an error wrapping ErrUnavailable.
func (s *Supplier) Instances(ctx context.Context, service string) ([]graylb.Instance, error) {
	if err := graylb.ValidateServiceName(service); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, graylb.ErrClosed
	}
	hosts, err := s.client.query(ctx, service, s.group, s.clusters)
	if err != nil {
		if ctx.Err() == nil {
			if cached, ok := s.client.cached(service, s.group, s.clusters); ok && len(cached) > 0 {
				s.logger.Warn("nacos: server unreachable; serving the cached list", "service", service, "err", firstLine(err))
				return s.convert(service, cached), nil
			}
		}
		return nil, fmt.Errorf("nacos: instances of %q: %w", service, err)
	}
	return s.convert(service, hosts), nil
}

// Watch subscribes to service (once per service) and calls fn with each
// list the server pushes or a reconciliation finds.
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
		sub = &subscription{}
		sub.param = &vo.SubscribeParam{
			ServiceName: service, GroupName: s.group, Clusters: s.clusters,
			SubscribeCallback: func(hosts []model.Instance, err error) { s.deliver(service, sub, hosts, err) },
		}
		if err := s.client.subscribe(sub.param); err != nil {
			// The callback stays registered and the SDK subscribes again
			// once connected.
			s.logger.Warn("nacos: subscribe failed; the SDK retries when connected", "service", service, "err", firstLine(err))
		}
		s.subs[service] = sub
	}
	remove := sub.watchers.Add(fn)
	var once sync.Once
	return func() { once.Do(func() { s.unwatch(service, sub, remove) }) }, nil
}

func (s *Supplier) deliver(service string, sub *subscription, hosts []model.Instance, err error) {
	if err != nil {
		s.logger.Warn("nacos: push failed; keeping the last list", "service", service, "err", firstLine(err))
		return
	}
	list := s.convert(service, hosts)
	sub.mu.Lock()
	defer sub.mu.Unlock()
	s.handOver(sub, list)
}

// handOver gives list to the watchers; sub.mu is held.
func (s *Supplier) handOver(sub *subscription, list []graylb.Instance) {
	sub.version++
	sub.last = listKeys(list)
	for _, fn := range sub.watchers.Snapshot() {
		fn(list)
	}
}

// reconcileLoop reads every subscribed service from the server each
// period and hands the list over when it differs from the last one.
func (s *Supplier) reconcileLoop() {
	defer s.done.Done()
	tick := time.NewTicker(s.reconcile)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		s.reconcileOnce()
	}
}

func (s *Supplier) reconcileOnce() {
	s.refresh(s.client.query, s.reconcile, false, "nacos: reconciled a list that differed from the server's")
}

// refresh reads every subscribed service with read (each read bounded by
// timeout) and hands a list over when it differs from the last one and
// nothing was handed over since the read began (a list handed over
// meanwhile, a push above all, is at least as new). A failed read leaves
// that service's last list serving; with probe, it ends the round (the
// server cannot be reached: one request is enough to learn it).
//
// It reports whether any read was answered.
func (s *Supplier) refresh(read func(ctx context.Context, service, group string, clusters []string) ([]model.Instance, error), timeout time.Duration, probe bool, msg string) (answered bool) {
	s.mu.Lock()
	subs := maps.Clone(s.subs)
	s.mu.Unlock()
	for service, sub := range subs {
		if s.life.Err() != nil { // closed
			return answered
		}
		sub.mu.Lock()
		v := sub.version
		sub.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.life, timeout)
		hosts, err := read(ctx, service, s.group, s.clusters)
		cancel()
		if err != nil {
			if probe {
				return answered
			}
			continue
		}
		answered = true
		list := s.convert(service, hosts)
		sub.mu.Lock()
		if sub.version == v && !slices.Equal(sub.last, listKeys(list)) && sub.watchers.Len() > 0 {
			// Nothing handed over yet: the watchers have the list Instances
			// answered them, which this one most likely is (the SDK tells
			// its callbacks of a subscription's first answer only when it
			// differs from what the SDK holds, and the query's repair
			// stored that list already); no news for the log.
			if v > 0 {
				s.logger.Info(msg, "service", service, "instances", len(list))
			}
			s.handOver(sub, list)
		}
		sub.mu.Unlock()
	}
	return answered
}

func (s *Supplier) unwatch(service string, sub *subscription, remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	remove()
	empty := sub.watchers.Len() == 0
	if empty && s.subs[service] == sub {
		delete(s.subs, service)
		if err := s.client.unsubscribe(sub.param); err != nil {
			s.logger.Warn("nacos: unsubscribe failed", "service", service, "err", firstLine(err))
		}
	}
}

// Close unsubscribes every service and closes the Client if the Supplier
// built it. It never waits for the server: closing the Client
// ends the calls in flight (measured with a SIGSTOPped and a killed
// server: 0.2-0.3 s; TestIntegration_StalledServerBlocksNothing).
func (s *Supplier) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.subs = nil
	close(s.stop)
	s.mu.Unlock()
	s.endLife() // a reconciliation's query in flight ends now
	s.done.Wait()
	for service, sub := range subs {
		if err := s.client.unsubscribe(sub.param); err != nil {
			s.logger.Warn("nacos: unsubscribe failed", "service", service, "err", firstLine(err))
		}
	}
	if s.closeFn != nil {
		s.closeFn()
	}
	return nil
}

// convert keeps the usable hosts (healthy, enabled, weight > 0) as graylb
// instances and drops, with a log line, those that are not valid.
func (s *Supplier) convert(service string, hosts []model.Instance) []graylb.Instance {
	out := make([]graylb.Instance, 0, len(hosts))
	for _, h := range hosts {
		in := graylb.Instance{
			Service: service, Host: h.Ip, Port: int(h.Port), Weight: h.Weight,
			Healthy: h.Healthy, Enabled: h.Enable, Cluster: h.ClusterName, Metadata: h.Metadata,
		}
		if !in.Usable() {
			continue
		}
		if err := in.Validate(); err != nil {
			s.logger.Warn("nacos: dropped an invalid instance from the registry", "service", service, "host", strconv.Quote(h.Ip), "port", h.Port, "err", err)
			continue
		}
		out = append(out, in)
	}
	return out
}

var (
	_ graylb.Supplier                      = (*Supplier)(nil)
	_ interface{ RefillUntil() time.Time } = (*Supplier)(nil) // see graylb.Supplier
)

// listKeys describes a list for comparison, in a fixed order.
func listKeys(list []graylb.Instance) []string {
	keys := make([]string, len(list))
	for i, in := range list {
		keys[i] = instanceKey(in.Host, uint64(in.Port), in.Weight, in.Healthy, in.Enabled, in.Cluster, in.Metadata)
	}
	sort.Strings(keys)
	return keys
}

func hostKey(h model.Instance) string {
	return instanceKey(h.Ip, h.Port, h.Weight, h.Healthy, h.Enable, h.ClusterName, h.Metadata)
}

func instanceKey(host string, port uint64, weight float64, healthy, enabled bool, cluster string, md map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %d %g %t %t %q", host, port, weight, healthy, enabled, cluster)
	for _, k := range slices.Sorted(maps.Keys(md)) {
		fmt.Fprintf(&b, " %q=%q", k, md[k])
	}
	return b.String()
}

// firstLine drops the stack trace the SDK's errors carry.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return msg[:i]
	}
	return msg
}
