package graylb

import "github.com/graylb/graylb/internal/engine"

// Subset names, as ServiceState reports them: which requests an instance
// serves under the rules in force.
const (
	SubsetProd = engine.SubsetProd
	SubsetGray = engine.SubsetGray
	SubsetAll  = engine.SubsetAll
)

// ServiceState is one service's routing as the LoadBalancer has it now.
type ServiceState = engine.ServiceState

// InstanceState is one instance as routing sees it.
type InstanceState = engine.InstanceState

// InstanceStats is a reading of an instance's Stats.
type InstanceStats = engine.InstanceStats

// Services returns the names of the services the LoadBalancer routes:
// those picked at least once, and those its Cache follows for adapters
// that route on their own (the gRPC balancer), sorted.
func (lb *LoadBalancer) Services() []string {
	return (*engine.LoadBalancer)(lb).Services()
}

// Snapshot returns the routing state of service, and false when the
// LoadBalancer does not route it (see Services). For a picked service it
// reads the immutable routing tree in force, without a lock; for one only
// the Cache follows, it classifies the Cache's list under the rules in
// force.
func (lb *LoadBalancer) Snapshot(service string) (ServiceState, bool) {
	return (*engine.LoadBalancer)(lb).Snapshot(service)
}
