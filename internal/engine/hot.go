package engine

import (
	"sync"
	"sync/atomic"
)

// What a pick reads of the LoadBalancer and of a service is grouped in a
// type of its own, which they pad to whole cache lines (see package
// cacheline): apart from every field written after New, and from what
// rebuilds of a service write, so that no write slows a pick down.

// balancerHot is what a pick reads of a LoadBalancer.
type balancerHot struct {
	services atomic.Pointer[serviceTable]
	rules    atomic.Pointer[compiledRules]
	handler  ContextHandler
	handlers *handlerSet // for an adapter's reader of the call's keys (callkeys.go)
	observer Observer
	calls    CallObserver // told of each call ended (package adapter's Call.End)
	gray     grayFilter
}

// serviceHot is what a pick reads of a service.
type serviceHot struct {
	name string
	tree atomic.Pointer[tree]
	// unlisted: a throw-away service for a name with no instance (not
	// kept, not watched, not shown to the Observer: names can come from
	// untrusted input and must not grow anything).
	unlisted bool
}

// serviceCold is what rebuilds of a service write.
type serviceCold struct {
	mu   sync.Mutex // serialises rebuilds
	list []Instance
	stop func()

	health  *health     // nil unless lb.keepStats
	pending atomic.Bool // a rebuild for an ejection or readmission is scheduled
}
