package otelgraylb

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope to get a Meter for.
const ScopeName = "github.com/graylb/graylb/otelgraylb"

// Attribute keys of the instruments.
const (
	AttrService = attribute.Key("graylb.service") // the service picked
	AttrKind    = attribute.Key("graylb.kind")    // the request's or instance's kind: prod, gray
	AttrOutcome = attribute.Key("graylb.outcome") // a pick's graylb.Outcome: selected, fell_back, bypassed, failed
	AttrResult  = attribute.Key("graylb.result")  // a cache update: applied, refused_empty, held_shrink
)

// Instrument names.
const (
	// MetricPicks counts picks by service, kind and outcome (Observer);
	// the failed picks of names the LoadBalancer does not route are counted
	// under the service graylb.UnroutedService ("<unrouted>").
	MetricPicks = "graylb.picks"
	// MetricInstances is the number of routable instances by service and
	// kind (Register).
	MetricInstances = "graylb.instances"
	// MetricCacheUpdates counts the Cache's list updates by result
	// (Register).
	MetricCacheUpdates = "graylb.cache.updates"
	// MetricRuleChanges counts accepted rule sets (Register).
	MetricRuleChanges = "graylb.rules.changes"
	// MetricRulesRefused counts refused rule sets and documents (Register).
	MetricRulesRefused = "graylb.rules.refused"
	// MetricEjections counts outlier detection's ejections by service and
	// instance kind (Register).
	MetricEjections = "graylb.ejections"
	// MetricEjected is the number of instances ejected now by service and
	// kind (Register).
	MetricEjected = "graylb.instances.ejected"
)

// Observer returns a graylb.Observer that counts each pick in the
// MetricPicks counter of meter, with the service, the request's kind and
// the outcome as attributes. Pass it to graylb.WithObserver.
//
// It runs on the pick path and allocates nothing there once a service
// has been seen: the attribute sets of each (kind, outcome) are built once
// per service and kept in a copy-on-write map. The map holds only the
// services the LoadBalancer knows, and graylb.UnroutedService, under which
// the failed picks of every name it does not route are counted (see
// graylb.Observer), so it stays as bounded as they are.
func Observer(meter metric.Meter) (graylb.Observer, error) {
	if meter == nil {
		return nil, fmt.Errorf("otelgraylb: nil meter")
	}
	c, err := meter.Int64Counter(MetricPicks,
		metric.WithDescription("Picks by service, request kind and outcome."),
		metric.WithUnit("{pick}"))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	p := &picks{counter: c}
	p.services.Store(&map[string]*pickOptions{})
	return p.observe, nil
}

const (
	kinds    = 2 // graylb.Prod, graylb.Gray
	outcomes = 4 // graylb.Selected .. graylb.Failed
)

// pickOptions are the measurement options of one service, by kind and
// outcome, built once.
type pickOptions [kinds][outcomes][]metric.AddOption

type picks struct {
	counter  metric.Int64Counter
	mu       sync.Mutex // serialises adding a service
	services atomic.Pointer[map[string]*pickOptions]
}

func (p *picks) observe(service string, kind graylb.Kind, outcome graylb.Outcome) {
	if int(kind) >= kinds || int(outcome) >= outcomes {
		p.counter.Add(context.Background(), 1, metric.WithAttributes(
			AttrService.String(service), AttrKind.String(kind.String()), AttrOutcome.String(outcome.String())))
		return
	}
	o := (*p.services.Load())[service]
	if o == nil {
		o = p.add(service)
	}
	p.counter.Add(context.Background(), 1, o[kind][outcome]...)
}

func (p *picks) add(service string) *pickOptions {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := *p.services.Load()
	if o := old[service]; o != nil {
		return o
	}
	o := new(pickOptions)
	for k := 0; k < kinds; k++ {
		for c := 0; c < outcomes; c++ {
			set := attribute.NewSet(AttrService.String(service),
				AttrKind.String(graylb.Kind(k).String()), AttrOutcome.String(graylb.Outcome(c).String()))
			o[k][c] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
	}
	m := make(map[string]*pickOptions, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[service] = o
	p.services.Store(&m)
	return o
}

// Option configures Register.
type Option func(*options)

type options struct {
	attrs []attribute.KeyValue
}

// WithAttributes adds attributes to every observation Register makes, to
// tell several LoadBalancers of one process apart (for example
// attribute.String("graylb.lb", "edge")).
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(o *options) { o.attrs = append(o.attrs, kv...) }
}

// Register registers observable instruments on meter that read lb's
// state at each collection, off the pick path:
//   - MetricInstances (gauge): routable instances by service and kind,
//     for each service lb routes;
//   - MetricCacheUpdates (counter): the Cache's updates by result:
//     applied, refused_empty (an empty update refused by the empty
//     protection), held_shrink (a sudden shrink held);
//   - MetricRuleChanges and MetricRulesRefused (counters): accepted and
//     refused rule sets and documents (graylb.LoadBalancer.RulesState);
//   - MetricEjections (counter): outlier detection's ejections by service
//     and instance kind (graylb.LoadBalancer.Ejections), and
//     MetricEjected (gauge): instances ejected now, by service and kind;
//     both only with outlier detection on.
//
// MetricInstances counts routable instances: an ejected one is counted
// in MetricEjected instead. Unregister the returned Registration before
// dropping lb.
func Register(meter metric.Meter, lb *graylb.LoadBalancer, opts ...Option) (metric.Registration, error) {
	if meter == nil || lb == nil {
		return nil, fmt.Errorf("otelgraylb: nil meter or LoadBalancer")
	}
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	instances, err := meter.Int64ObservableGauge(MetricInstances,
		metric.WithDescription("Routable instances by service and kind."), metric.WithUnit("{instance}"))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	updates, err := meter.Int64ObservableCounter(MetricCacheUpdates,
		metric.WithDescription("Instance-list updates by result: applied, refused_empty, held_shrink."), metric.WithUnit("{update}"))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	changes, err := meter.Int64ObservableCounter(MetricRuleChanges,
		metric.WithDescription("Accepted rule sets."), metric.WithUnit("{change}"))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	refused, err := meter.Int64ObservableCounter(MetricRulesRefused,
		metric.WithDescription("Refused rule sets and documents; the previous rules stayed in force."), metric.WithUnit("{document}"))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	ejections, err := meter.Int64ObservableCounter(MetricEjections,
		metric.WithDescription("Outlier ejections by service and instance kind."), metric.WithUnit("{ejection}"))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	ejected, err := meter.Int64ObservableGauge(MetricEjected,
		metric.WithDescription("Instances ejected by outlier detection now, by service and kind."), metric.WithUnit("{instance}"))
	if err != nil {
		return nil, fmt.Errorf("otelgraylb: %w", err)
	}
	with := func(kv ...attribute.KeyValue) metric.ObserveOption {
		return metric.WithAttributes(append(kv, o.attrs...)...)
	}
	ab := adapter.For(lb)
	return meter.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		es := lb.Ejections()
		for _, c := range es.Counts {
			ob.ObserveInt64(ejections, int64(c.Ejections), with(AttrService.String(c.Service), AttrKind.String(c.Kind.String())))
		}
		for _, svc := range lb.Services() {
			st, ok := lb.Snapshot(svc)
			if !ok {
				continue
			}
			ob.ObserveInt64(instances, int64(st.Prod), with(AttrService.String(svc), AttrKind.String(graylb.Prod.String())))
			ob.ObserveInt64(instances, int64(st.Gray), with(AttrService.String(svc), AttrKind.String(graylb.Gray.String())))
			if es.Enabled {
				ob.ObserveInt64(ejected, int64(st.EjectedProd), with(AttrService.String(svc), AttrKind.String(graylb.Prod.String())))
				ob.ObserveInt64(ejected, int64(st.EjectedGray), with(AttrService.String(svc), AttrKind.String(graylb.Gray.String())))
			}
		}
		cs := ab.Cache().Stats()
		ob.ObserveInt64(updates, int64(cs.Applied), with(AttrResult.String("applied")))
		ob.ObserveInt64(updates, int64(cs.RefusedEmpty), with(AttrResult.String("refused_empty")))
		ob.ObserveInt64(updates, int64(cs.HeldShrinks), with(AttrResult.String("held_shrink")))
		rs := lb.RulesState()
		ob.ObserveInt64(changes, int64(rs.Changes), with())
		ob.ObserveInt64(refused, int64(rs.Refused), with())
		return nil
	}, instances, updates, changes, refused, ejections, ejected)
}
