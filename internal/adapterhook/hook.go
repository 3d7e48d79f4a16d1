// Package adapterhook hands package adapter the adapter surface of a
// LoadBalancer without an import cycle: package adapter imports graylb (for
// Instance, Kind, Keys...), so graylb cannot import adapter; both import
// this package instead, as grpc-go's grpc and balancer packages share
// grpc/internal.
package adapterhook

// Of returns the adapter surface of lb, a *graylb.LoadBalancer: a value of
// an unexported graylb type whose exported methods satisfy an interface
// declared in package adapter. It returns nil for anything else.
//
// Package graylb sets Of once, in its init, before any other package can
// run; nothing writes it again, so reading it needs no synchronisation.
var Of func(lb any) any
