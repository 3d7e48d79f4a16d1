package graylb

import "github.com/graylb/graylb/internal/engine"

// Instance is one registered instance of a service. Once handed to graylb,
// an Instance and its Metadata map are read-only.
type Instance = engine.Instance

// NewInstance returns a healthy, enabled instance of weight 1, the defaults
// Nacos gives a registration.
func NewInstance(service, host string, port int, metadata map[string]string) Instance {
	return engine.NewInstance(service, host, port, metadata)
}
