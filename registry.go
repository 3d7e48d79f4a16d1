package graylb

import "github.com/graylb/graylb/internal/engine"

// Registry is the in-memory Supplier: the embedded default that examples
// and tests run on without Nacos. Instances are keyed by service and
// host:port; registering the same address again replaces the instance.
// Watchers are called synchronously, in order, after each change.
type Registry = engine.Registry

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return engine.NewRegistry()
}
