// Package adapterhook hands package adapter the adapter surface of a
// LoadBalancer without an import cycle: package adapter imports graylb (for
// Instance, Kind, Keys...), so graylb cannot import adapter; both import
// this package instead, as grpc-go's grpc and balancer packages share
// grpc/internal.
package adapterhook

// Of returns the value build made of lb, a *graylb.LoadBalancer, and its
// adapter surface (a value of an unexported graylb type whose exported
// methods satisfy an interface declared in package adapter): build runs
// the first time Of is called with lb, and the LoadBalancer keeps what it
// returned, so every later call returns that same value without
// allocating. Two first calls at once may both run build; one result is
// kept and both return it. Of returns nil for anything but a non-nil
// *graylb.LoadBalancer.
//
// Package graylb sets Of once, in its init, before any other package can
// run; nothing writes it again, so reading it needs no synchronisation.
var Of func(lb any, build func(lb, surface any) any) any
