package graylb

import "github.com/graylb/graylb/internal/engine"

// EjectionsState is what the LoadBalancer knows of outlier detection.
type EjectionsState = engine.EjectionsState

// EjectionCount counts the ejections and readmissions of one kind of
// instance of one service.
type EjectionCount = engine.EjectionCount

// Ejections returns the ejections and readmissions outlier detection made,
// and how many instances are ejected now. Which instances are ejected is
// in each service's Snapshot.
func (lb *LoadBalancer) Ejections() EjectionsState {
	return (*engine.LoadBalancer)(lb).Ejections()
}
