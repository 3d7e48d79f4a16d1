package engine

import (
	"context"
)

// Supplier is graylb.Supplier.
type Supplier interface {
	// Instances returns the current instances of service. An unknown
	// service gives an error wrapping ErrUnknownService.
	Instances(ctx context.Context, service string) ([]Instance, error)
	// Watch calls fn with the full list each time it changes, until stop
	// is called. Calls for one service do not overlap.
	Watch(service string, fn func([]Instance)) (stop func(), err error)
}
