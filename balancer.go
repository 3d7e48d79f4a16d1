package graylb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is what a pick did, for an Observer.
type Outcome uint8

const (
	// Selected: the request reached an instance of its own kind.
	Selected Outcome = iota
	// FellBack: a gray request was served from prod (no gray instance, or
	// the rules are closed).
	FellBack
	// Bypassed: gray routing is disabled by the rules; any instance.
	Bypassed
	// NoInstance: nothing to pick; the pick failed with ErrNoInstance.
	NoInstance
)

func (o Outcome) String() string {
	switch o {
	case Selected:
		return "selected"
	case FellBack:
		return "fell_back"
	case Bypassed:
		return "bypassed"
	default:
		return "no_instance"
	}
}

// Observer is told of every pick's outcome, the way Envoy counts
// lb_subsets_selected and lb_subsets_fallback. It runs on the pick path:
// keep it short and non-blocking (an atomic add). A nil Observer costs
// nothing.
type Observer func(service string, kind Kind, outcome Outcome)

// LoadBalancer picks an instance of a service for each request: it runs the
// filter chain (GrayFilter first) over a cached instance list and a
// load-balancing policy over the result. It is safe for concurrent use.
//
// Routing is precomputed per instance-list or rules change into an
// immutable tree swapped atomically; Pick reads it without a lock, in O(1)
// in the number of instances, without allocating.
type LoadBalancer struct {
	cache     *Cache
	ownsCache bool
	gray      *GrayFilter
	filters   []ServerFilter
	policy    Policy
	handler   ContextHandler
	observer  Observer
	logger    *slog.Logger

	rules    atomic.Pointer[compiledRules]
	services atomic.Pointer[map[string]*service]

	mu       sync.Mutex // guards adding services, Close
	closed   atomic.Bool
	ruleStop func()

	watchMu      sync.Mutex
	ruleWatchers map[uint64]func()
	nextWatch    uint64

	testHookServiceBuilt func() // tests: runs after a new service's first build, before it is published
}

type service struct {
	name string
	tree atomic.Pointer[tree]
	mu   sync.Mutex // serialises rebuilds
	list []Instance
	stop func()
}

// Option configures a LoadBalancer.
type Option func(*config)

type config struct {
	gray       *GrayFilter
	grayOpts   []GrayOption
	filters    []ServerFilter
	policy     Policy
	handlers   []ContextHandler
	observer   Observer
	logger     *slog.Logger
	rules      *Rules
	ruleSource RuleSource
	cacheOpts  []CacheOption

	ruleLoadTimeout time.Duration
}

// WithGrayFilter replaces the default GrayFilter.
func WithGrayFilter(f *GrayFilter) Option { return func(c *config) { c.gray = f } }

// WithGrayOptions configures the default GrayFilter.
func WithGrayOptions(opts ...GrayOption) Option {
	return func(c *config) { c.grayOpts = append(c.grayOpts, opts...) }
}

// WithFilters adds filters to the chain, ordered by their Order after the
// GrayFilter.
func WithFilters(filters ...ServerFilter) Option {
	return func(c *config) { c.filters = append(c.filters, filters...) }
}

// WithPolicy sets the load-balancing policy (default RoundRobin).
func WithPolicy(p Policy) Option { return func(c *config) { c.policy = p } }

// WithContextHandler adds ContextHandlers that read request values (the
// httpctx and grpcctx adapters); the first non-empty value wins.
func WithContextHandler(h ...ContextHandler) Option {
	return func(c *config) { c.handlers = append(c.handlers, h...) }
}

// WithObserver sets the pick observer.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithRules sets the initial rules.
func WithRules(r Rules) Option { return func(c *config) { c.rules = &r } }

// WithRuleSource loads the rules from src and follows its changes.
func WithRuleSource(src RuleSource) Option { return func(c *config) { c.ruleSource = src } }

// DefaultRuleLoadTimeout bounds how long New waits for a rule source's
// first Load.
const DefaultRuleLoadTimeout = 3 * time.Second

// WithRuleLoadTimeout bounds how long New waits for the rule source's first
// Load (default DefaultRuleLoadTimeout; d <= 0 keeps the default). When it
// runs out, New returns with the initial rules (WithRules, else none) and
// the source's later changes still apply.
func WithRuleLoadTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ruleLoadTimeout = d
		}
	}
}

// WithCacheOptions configures the Cache that New puts over the Supplier.
func WithCacheOptions(opts ...CacheOption) Option {
	return func(c *config) { c.cacheOpts = append(c.cacheOpts, opts...) }
}

// New returns a LoadBalancer over the instances of s. Unless s is already
// a *Cache, New puts one over it (and Close closes it).
func New(s Supplier, opts ...Option) (*LoadBalancer, error) {
	if s == nil {
		return nil, errors.New("graylb: nil supplier")
	}
	cfg := config{ruleLoadTimeout: DefaultRuleLoadTimeout}
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
	if cfg.gray == nil {
		for _, f := range cfg.filters {
			if g, ok := f.(*GrayFilter); ok && g != nil {
				cfg.gray = g
			}
		}
	}
	if cfg.gray == nil {
		cfg.gray = NewGrayFilter(cfg.grayOpts...)
	}
	lb := &LoadBalancer{
		gray:     cfg.gray,
		filters:  sortFilters(cfg.gray, cfg.filters),
		policy:   cfg.policy,
		observer: cfg.observer,
		logger:   cfg.logger,
	}
	if h := ChainHandlers(cfg.handlers...).(chainHandler); len(h) == 1 {
		lb.handler = h[0]
	} else if len(h) > 1 {
		lb.handler = h
	}
	lb.rules.Store(defaultCompiledRules)
	lb.services.Store(&map[string]*service{})
	if cfg.rules != nil {
		if err := lb.SetRules(*cfg.rules); err != nil {
			return nil, err
		}
	}
	if c, ok := s.(*Cache); ok {
		lb.cache = c
	} else {
		gray := cfg.gray
		prodOnly := func(in Instance) string { // guard the prod side only
			if gray.InstanceKind(in) == Prod {
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
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ruleLoadTimeout)
		r, err := src.Load(ctx)
		cancel()
		if err != nil {
			lb.logger.Error("graylb: loading rules failed; keeping the current rules", "err", err)
		} else if err := lb.SetRules(r); err != nil {
			lb.logger.Error("graylb: rules refused; keeping the current rules", "err", err)
		}
		stop, err := src.Watch(func(r Rules) {
			if err := lb.SetRules(r); err != nil {
				lb.logger.Error("graylb: rules refused; keeping the current rules", "err", err)
			}
		})
		if err != nil {
			lb.Close()
			return nil, fmt.Errorf("graylb: watching rules: %w", err)
		}
		lb.ruleStop = stop
	}
	return lb, nil
}

// Handler returns the LoadBalancer's ContextHandler chain (nil if none).
func (lb *LoadBalancer) Handler() ContextHandler { return lb.handler }

// Policy returns the load-balancing policy.
func (lb *LoadBalancer) Policy() Policy { return lb.policy }

// GrayFilter returns the chain's GrayFilter.
func (lb *LoadBalancer) GrayFilter() *GrayFilter { return lb.gray }

// SetRules validates r and, if valid, puts it in force for every service.
// Invalid rules are refused with an error wrapping ErrInvalidRules and the
// previous rules stay in force.
func (lb *LoadBalancer) SetRules(r Rules) error {
	c, err := compileRules(r)
	if err != nil {
		return err
	}
	lb.rules.Store(c)
	for _, s := range *lb.services.Load() {
		s.mu.Lock()
		lb.rebuild(s, s.list)
		s.mu.Unlock()
	}
	lb.rulesChanged()
	return nil
}

// OnRulesChange calls fn after each accepted rules change, once every
// service's routing follows it, until stop is called. Adapters that keep
// routing of their own (the gRPC balancer's pickers) rebuild it there, off
// the pick path. fn must not block.
func (lb *LoadBalancer) OnRulesChange(fn func()) (stop func()) {
	lb.watchMu.Lock()
	defer lb.watchMu.Unlock()
	id := lb.nextWatch
	lb.nextWatch++
	if lb.ruleWatchers == nil {
		lb.ruleWatchers = map[uint64]func(){}
	}
	lb.ruleWatchers[id] = fn
	var once sync.Once
	return func() {
		once.Do(func() {
			lb.watchMu.Lock()
			delete(lb.ruleWatchers, id)
			lb.watchMu.Unlock()
		})
	}
}

func (lb *LoadBalancer) rulesChanged() {
	lb.watchMu.Lock()
	fns := make([]func(), 0, len(lb.ruleWatchers))
	for _, fn := range lb.ruleWatchers {
		fns = append(fns, fn)
	}
	lb.watchMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Pick returns an instance of service for the request in ctx.
//
// Errors wrap ErrNoInstance (the request's kind has no instance; the error
// names the service and the kind), ErrInvalidService, ErrUnknownService
// (from the supplier) or ErrClosed.
func (lb *LoadBalancer) Pick(ctx context.Context, service string) (Instance, error) {
	r, err := lb.Route(ctx, service)
	if err != nil {
		return Instance{}, err
	}
	return r.Next(), nil
}

// Route runs the chain for the request in ctx and returns its candidates.
// Route.Next picks among them; a caller that retries on another instance of
// the same kind calls Next again.
func (lb *LoadBalancer) Route(ctx context.Context, service string) (Route, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s := (*lb.services.Load())[service]
	if s == nil {
		var err error
		if s, err = lb.addService(ctx, service); err != nil {
			return Route{}, err
		}
	}
	return lb.route(ctx, service, s.tree.Load())
}

func (lb *LoadBalancer) route(ctx context.Context, service string, t *tree) (Route, error) {
	n, kind, outcome := t.route(Request{Context: ctx, Service: service, handler: lb.handler})
	if lb.observer != nil {
		lb.observer(service, kind, outcome)
	}
	if n == nil {
		return Route{Kind: kind, Outcome: outcome}, &NoInstanceError{Service: service, Kind: kind}
	}
	return Route{Kind: kind, Outcome: outcome, leaf: n}, nil
}

// Route is the result of running the chain for one request.
type Route struct {
	Kind    Kind    // the request's kind
	Outcome Outcome // what the gray decision did
	leaf    *node
}

// Picker returns the policy's picker over the candidates (nil when there
// are none), for adapters whose Policy picks more than an index.
func (r Route) Picker() Picker {
	if r.leaf == nil {
		return nil
	}
	return r.leaf.picker
}

// Instances returns the candidates. The slice is shared: do not modify it.
func (r Route) Instances() []Instance {
	if r.leaf == nil {
		return nil
	}
	return r.leaf.instances
}

// Len returns the number of candidates.
func (r Route) Len() int {
	if r.leaf == nil {
		return 0
	}
	return len(r.leaf.instances)
}

// Next picks one candidate with the policy. It returns the zero Instance
// when the route has none.
func (r Route) Next() Instance {
	if r.Len() == 0 {
		return Instance{}
	}
	return r.leaf.instances[r.leaf.picker.Next()]
}

// Supplier returns the Cache the LoadBalancer reads instances from.
func (lb *LoadBalancer) Supplier() *Cache { return lb.cache }

// Router is a routing snapshot of one service over an explicit instance
// list, built with a LoadBalancer's filters, rules, policy, handler and
// observer: what the gRPC balancer's picker runs over the instances of its
// connections. It is immutable and safe for concurrent use; it does not
// follow rule changes: build a new one (OnRulesChange says when).
type Router struct {
	lb      *LoadBalancer
	service string
	tree    *tree
}

// NewRouter builds a Router for service over list (usable instances only)
// with policy, or the LoadBalancer's policy when nil, under the rules in
// force.
func (lb *LoadBalancer) NewRouter(service string, list []Instance, policy Policy) (*Router, error) {
	if err := ValidateServiceName(service); err != nil {
		return nil, err
	}
	if policy == nil {
		policy = lb.policy
	}
	t, err := buildTree(service, usable(list), lb.filters, lb.rules.Load(), policy)
	if err != nil {
		return nil, err
	}
	return &Router{lb: lb, service: service, tree: t}, nil
}

// Route runs the chain for the request in ctx. It does not block.
func (r *Router) Route(ctx context.Context) (Route, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return r.lb.route(ctx, r.service, r.tree)
}

func (lb *LoadBalancer) addService(ctx context.Context, name string) (*service, error) {
	if err := ValidateServiceName(name); err != nil {
		return nil, err
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed.Load() {
		return nil, ErrClosed
	}
	if s := (*lb.services.Load())[name]; s != nil {
		return s, nil
	}
	list, err := lb.cache.Instances(ctx, name)
	if err != nil {
		return nil, err
	}
	s := &service{name: name}
	s.mu.Lock()
	lb.rebuild(s, list)
	s.mu.Unlock()
	stop, err := lb.cache.Watch(name, func(l []Instance) {
		s.mu.Lock()
		lb.rebuild(s, l)
		s.mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	s.stop = stop
	// The cache may have changed between Instances and Watch.
	if l, err := lb.cache.Instances(ctx, name); err == nil {
		s.mu.Lock()
		lb.rebuild(s, l)
		s.mu.Unlock()
	}
	if lb.testHookServiceBuilt != nil {
		lb.testHookServiceBuilt()
	}
	old := *lb.services.Load()
	m := make(map[string]*service, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = s
	lb.services.Store(&m)
	// A SetRules that ran between the build and the publication above did
	// not see s in the map; it stored its rules first, so they are visible
	// here (both sides use sequentially consistent atomics).
	s.mu.Lock()
	if s.tree.Load().rules != lb.rules.Load() {
		lb.rebuild(s, s.list)
	}
	s.mu.Unlock()
	return s, nil
}

// rebuild builds and installs the tree for list; s.mu is held. A failed
// build keeps the previous tree.
func (lb *LoadBalancer) rebuild(s *service, list []Instance) {
	rules := lb.rules.Load()
	t, err := buildTree(s.name, list, lb.filters, rules, lb.policy)
	if err != nil {
		lb.logger.Error("graylb: keeping the previous routing", "service", s.name, "err", err)
		if s.tree.Load() != nil {
			return
		}
		t, _ = buildTree(s.name, nil, lb.filters[:1], rules, lb.policy)
	}
	s.list = list
	s.tree.Store(t)
}

// Close stops following the supplier and the rule source. Picks for
// services already in use keep serving their last lists; new services
// give ErrClosed.
func (lb *LoadBalancer) Close() error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed.Swap(true) {
		return nil
	}
	if lb.ruleStop != nil {
		lb.ruleStop()
	}
	for _, s := range *lb.services.Load() {
		if s.stop != nil {
			s.stop()
		}
	}
	if lb.ownsCache {
		return lb.cache.Close()
	}
	return nil
}
