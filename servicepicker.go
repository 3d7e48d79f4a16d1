package graylb

import "github.com/graylb/graylb/internal/engine"

// ServicePicker picks instances of one service for a caller that calls it
// again and again, as a gRPC ClientConn calls its target: its Pick(ctx) is
// LoadBalancer.Pick(ctx, service) without finding the service by its name
// on every call. It follows the service's instance lists and the rules as
// Pick does, and is safe for concurrent use.
type ServicePicker = engine.ServicePicker

// Service returns the ServicePicker of service. It does no I/O: the first
// Pick queries the supplier, as LoadBalancer.Pick does. A name that cannot
// be a service's gives an error wrapping ErrInvalidService.
func (lb *LoadBalancer) Service(service string) (*ServicePicker, error) {
	return (*engine.LoadBalancer)(lb).Service(service)
}
