package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/fanout"
)

// Routing is precomputed per instance-list or rules change into an immutable
// tree swapped atomically; Pick reads it without a lock, in O(1) in the number
// of instances, without allocating.

// LoadBalancer is graylb.LoadBalancer.
type LoadBalancer struct {
	// What a pick reads, first and apart from every field written after
	// New (see package cacheline; the allocator may put a header before it).
	balancerHot
	_ [cacheline.Size - unsafe.Sizeof(balancerHot{})%cacheline.Size]byte

	cache     *Cache
	ownsCache bool
	filters   []ServerFilter // the user's, sorted
	policy    Policy
	logger    *slog.Logger
	// The request's version key and the instances' version metadata key:
	// the last VersionFilter's, else the defaults.
	versionHdr, versionMeta string

	mu       sync.Mutex // guards adding services, Close; never held across I/O
	closed   atomic.Bool
	ruleStop func()

	// Lookups of services not routed yet (lookup.go): in flight, guarded
	// by mu; a slot of lookupSlots each; life is the context they run
	// under, which Close cancels.
	lookups     map[string]*lookup
	lookupSlots chan struct{}
	life        context.Context
	endLife     context.CancelFunc

	ruleWatchers fanout.Set[func()]
	// Stats and outlier detection (ejection.go, stats.go).
	outlier        *OutlierConfig // nil: no ejection
	baggage        Baggage        // nil: the calls' baggage is not read
	shadowObs      []ShadowObserver
	shadowLog      shadowLog
	keepStats      bool // outlier detection, or a StatsPolicy
	healthWatchers fanout.Set[func(service string)]
	ruleLog        ruleLog     // rules in force, changes and refusals (RulesState)
	ejectionLog    ejectionLog // ejections and readmissions (Ejections)
	unrouted       unroutedLog // failed picks of names not routed (Unrouted)
	arrivals       arrivals    // calls admitted, for Quiet (process.go)

	testHookServiceBuilt func() // tests: runs after a new service's first build, before it is published
}

type service struct {
	// What a pick reads, on a cache line of its own (see package cacheline).
	serviceHot
	_ [cacheline.Size - unsafe.Sizeof(serviceHot{})%cacheline.Size]byte

	serviceCold
	_ [cacheline.Size - unsafe.Sizeof(serviceCold{})%cacheline.Size]byte
}

// New is graylb.New.
func New(s Supplier, opts ...Option) (*LoadBalancer, error) {
	if s == nil {
		return nil, errors.New("graylb: nil supplier")
	}
	cfg := config{gray: defaultGrayFilter(), ruleLoadTimeout: DefaultRuleLoadTimeout}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.policy == nil {
		cfg.policy = RoundRobin()
	}
	lb := &LoadBalancer{
		balancerHot: balancerHot{
			gray:     cfg.gray,
			handler:  chainHandlers(cfg.handlers),
			handlers: newHandlerSet(cfg.handlers),
			observer: cfg.observer,
			calls:    cfg.calls,
		},
		filters:   sortFilters(cfg.filters),
		policy:    cfg.policy,
		logger:    cfg.logger,
		outlier:   cfg.outlier,
		baggage:   cfg.baggage,
		shadowObs: cfg.shadowObs,
	}
	lb.life, lb.endLife = context.WithCancel(context.Background())
	lb.lookupSlots = make(chan struct{}, maxLookups)
	lb.outlier = lb.ejectionLog.wrap(cfg.outlier) // counts each event for Ejections
	lb.versionHdr, lb.versionMeta = DefaultVersionHeader, DefaultVersionKey
	for _, f := range lb.filters { // the last VersionFilter's keys, as routing reads them
		if v, ok := f.(*VersionFilter); ok {
			lb.versionHdr, lb.versionMeta = v.header, v.metaKey
		}
	}
	_, statsPolicy := cfg.policy.(StatsPolicy)
	lb.keepStats = cfg.outlier != nil || statsPolicy
	lb.rules.Store(defaultCompiledRules)
	lb.services.Store(emptyServiceTable)
	if cfg.rules != nil {
		if err := lb.SetRules(*cfg.rules); err != nil {
			return nil, err
		}
	}
	if c, ok := s.(*Cache); ok {
		lb.cache = c
	} else {
		// Guard the prod side against a sudden loss, classified as routing
		// classifies it now (gray addresses included).
		prodOnly := func(in Instance) string {
			if lb.gray.instanceKind(in, lb.rules.Load()) == Prod {
				return "prod"
			}
			return ""
		}
		c, err := NewCache(s, append([]CacheOption{WithCacheLogger(cfg.logger), WithPartition(prodOnly)}, cfg.cacheOpts...)...)
		if err != nil {
			return nil, err
		}
		lb.cache, lb.ownsCache = c, true
	}
	if src := cfg.ruleSource; src != nil {
		lb.ruleLog.setSource(src)
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ruleLoadTimeout)
		r, err := src.Load(ctx)
		cancel()
		if err != nil {
			lb.ruleLog.loadFailed(err)
			lb.logger.Error("graylb: loading rules failed; keeping the current rules", "err", err)
		} else if err := lb.SetRules(r); err != nil {
			lb.logger.Error("graylb: rules refused; keeping the current rules", "err", err)
		}
		stopRefused := lb.watchRefusals(src) // documents Watch refuses (rulereport.go)
		stop, err := src.Watch(func(r Rules) {
			if err := lb.SetRules(r); err != nil {
				lb.logger.Error("graylb: rules refused; keeping the current rules", "err", err)
			}
		})
		if err != nil {
			stopRefused()
			lb.Close()
			return nil, fmt.Errorf("graylb: watching rules: %w", err)
		}
		lb.ruleStop = func() { stop(); stopRefused() }
	}
	addLive(lb)
	return lb, nil
}

// SetRules is graylb.LoadBalancer.SetRules.
func (lb *LoadBalancer) SetRules(r Rules) error {
	c, err := compileRules(r)
	if err != nil {
		lb.ruleLog.refused(&r, err)
		return err
	}
	lb.ruleLog.store(&lb.rules, c, r) // lb.rules.Store(c), recorded for RulesState
	for _, s := range lb.services.Load().all() {
		s.mu.Lock()
		lb.rebuild(s, s.list)
		s.mu.Unlock()
	}
	lb.rulesChanged()
	return nil
}

// onRulesChange calls fn after each accepted rules change, once every
// service's routing follows it, until stop is called (package adapter's
// Balancer.OnRulesChange). Adapters that keep
// routing of their own (the gRPC balancer's pickers) rebuild it there, off
// the pick path. fn must not block.
func (lb *LoadBalancer) onRulesChange(fn func()) (stop func()) { return lb.ruleWatchers.Add(fn) }

func (lb *LoadBalancer) rulesChanged() {
	for _, fn := range lb.ruleWatchers.Snapshot() {
		fn()
	}
}

// Pick is graylb.LoadBalancer.Pick.
func (lb *LoadBalancer) Pick(ctx context.Context, service string) (Instance, error) {
	// Small enough to be inlined: the picked instance is copied once,
	// straight into the caller's result.
	in, err := lb.PickRef(ctx, service)
	if err != nil {
		return Instance{}, err
	}
	return *in, nil
}

// PickRef is Pick returning the picked instance in its leaf's list, which
// the caller must not modify (package graylb's Pick copies it once into
// its caller's result): the hot path walks the tree and the leaf's policy
// picks, without building a routing; everything else is in pickSlow,
// which keeps this frame small.
func (lb *LoadBalancer) PickRef(ctx context.Context, service string) (*Instance, error) {
	if ctx != nil {
		if s := lb.services.Load().get(service); s != nil {
			return s.tree.Load().pick(ctx, lb.handler, lb.observer)
		}
	}
	return lb.pickSlow(ctx, service)
}

// pickSlow is pick for a nil context or a service not routed yet.
func (lb *LoadBalancer) pickSlow(ctx context.Context, service string) (*Instance, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := lb.routeReq(ctx, service)
	if err != nil {
		return nil, err
	}
	return &r.leaf.instances[r.NextIndex()], nil
}

// routeReq runs the chain for the request in ctx and returns its
// candidates, reading the call's keys through the ContextHandlers alone
// (routeWith without an adapter's reader).
func (lb *LoadBalancer) routeReq(ctx context.Context, service string) (routing, error) {
	return lb.routeWith(ctx, service, nil)
}

// route runs the chain of t for the request in ctx, whose call's keys call
// reads (nil: the ContextHandlers alone).
func (lb *LoadBalancer) route(ctx context.Context, service string, t *tree, call ContextHandler) (routing, error) {
	var d decision
	n, err := t.walk(ctx, call, lb.handlerFor(call), lb.observer, &d)
	// Returned as built, in registers: a local routing copied out stalls on
	// the byte-wide stores that built it.
	return routing{Kind: d.kind, Source: d.source, Outcome: d.outcome, Lane: d.lane, leaf: n}, err
}

// emptyTree is the routing of a service with no instance.
func (lb *LoadBalancer) emptyTree(name string) *tree {
	t, _ := buildTree(name, nil, &lb.gray, nil, lb.rules.Load(), lb.policy, nil)
	return t
}

// rebuild builds and installs the tree for list under the rules in force;
// s.mu is held. A failed build keeps the previous tree.
func (lb *LoadBalancer) rebuild(s *service, list []Instance) {
	rules := lb.rules.Load()
	live := liveLists{list, list}
	var ejected [2]int
	var stats statsFunc
	if h := s.health; h != nil {
		h.sync(list, func(in Instance) Kind { return lb.gray.instanceKind(in, rules) })
		live, ejected = h.live(list)
		stats = h.statsOf
	}
	t, err := buildLive(s.name, live, &lb.gray, lb.filters, rules, lb.policy, stats)
	if err != nil {
		// A filter failed. Under the same rules the previous routing is
		// still right for its list; under new rules (a gray address, say)
		// it is not, so route by the gray decision alone, which cannot fail
		// and keeps prod off every instance the new rules make gray.
		if old := s.tree.Load(); old != nil && old.rules == rules {
			lb.logger.Error("graylb: keeping the previous routing", "service", s.name, "err", err)
			return
		}
		lb.logger.Error("graylb: routing by the gray decision alone", "service", s.name, "err", err)
		t, _ = buildLive(s.name, live, &lb.gray, nil, rules, lb.policy, stats)
	}
	t.ejected = ejected
	s.list = list
	s.tree.Store(t)
}

// Close is graylb.LoadBalancer.Close.
func (lb *LoadBalancer) Close() error {
	lb.mu.Lock()
	if lb.closed.Swap(true) {
		lb.mu.Unlock()
		return nil
	}
	// No service is published after this (runLookup checks closed under mu).
	services := lb.services.Load().all()
	lb.mu.Unlock()
	removeLive(lb)
	lb.endLife()
	if lb.ruleStop != nil {
		lb.ruleStop()
	}
	for _, s := range services {
		s.release()
	}
	if lb.ownsCache {
		return lb.cache.Close()
	}
	return nil
}

// healthChanged rebuilds s's routing after an ejection or a readmission,
// on the goroutine that reported it (once per event, not per failure).
// Events that arrive while a rebuild is pending share it: one rebuild reads
// every instance's state as it is when it runs.
func (lb *LoadBalancer) healthChanged(s *service) {
	if !s.pending.CompareAndSwap(false, true) {
		return
	}
	// Rebuild on the reporting goroutine: the call that ejected the
	// instance returns once no later pick can reach it (a rebuild on
	// another goroutine left a window in which a loaded machine sent more
	// requests to the ejected instance). One rebuild per ejection or
	// readmission, coalesced by s.pending.
	s.mu.Lock()
	s.pending.Store(false)
	lb.rebuild(s, s.list)
	s.mu.Unlock()
	for _, fn := range lb.healthWatchers.Snapshot() {
		fn(s.name)
	}
}

// onEjectionChange (package adapter's Balancer.OnEjectionChange) calls fn
// with the service's name after an ejection or a
// readmission changed which of its instances are usable, once the
// LoadBalancer's own routing follows it, until stop is called. Adapters
// that keep routing of their own (the gRPC balancer's Routers) rebuild it
// there. fn must not block.
func (lb *LoadBalancer) onEjectionChange(fn func(service string)) (stop func()) {
	return lb.healthWatchers.Add(fn)
}

// healthOf returns the Stats table of service, adding the service when
// Stats are kept and it is not routed yet; nil when no Stats are kept or
// the service cannot be added.
func (lb *LoadBalancer) healthOf(service string) *health {
	if !lb.keepStats {
		return nil
	}
	s := lb.services.Load().get(service)
	if s == nil {
		var err error
		if s, err = lb.addService(context.Background(), service); err != nil {
			return nil
		}
	}
	return s.health
}

// report (package adapter's Balancer.Report) reports the result of a call
// to inst of service made without a started call (see routing.Call): ok is false for a
// failure that counts against the instance, latency is the call's
// duration (0 when unknown). It does nothing when the LoadBalancer keeps
// no Stats or does not know the instance.
func (lb *LoadBalancer) report(service string, inst Instance, ok bool, latency time.Duration) {
	s := lb.services.Load().get(service)
	if s == nil || s.health == nil {
		return
	}
	s.health.statsOf(inst).Report(ok, latency)
}
