package graylb

import (
	"fmt"
	"math"
	"net"
	"strconv"
)

// Instance is one registered instance of a service. Once handed to graylb,
// an Instance and its Metadata map are read-only.
type Instance struct {
	Service  string
	Host     string
	Port     int
	Weight   float64 // Nacos weight; 0 gets no traffic
	Healthy  bool
	Enabled  bool
	Cluster  string
	Metadata map[string]string
}

// NewInstance returns a healthy, enabled instance of weight 1, the defaults
// Nacos gives a registration.
func NewInstance(service, host string, port int, metadata map[string]string) Instance {
	return Instance{Service: service, Host: host, Port: port, Weight: 1, Healthy: true, Enabled: true, Metadata: metadata}
}

// Addr returns host:port.
func (i Instance) Addr() string { return net.JoinHostPort(i.Host, strconv.Itoa(i.Port)) }

// Usable reports whether the instance may receive traffic: healthy,
// enabled, and of a positive, finite weight.
func (i Instance) Usable() bool {
	return i.Healthy && i.Enabled && i.Weight > 0 && !math.IsInf(i.Weight, 1)
}

// Validate returns an error wrapping ErrInvalidInstance (or
// ErrInvalidService) when the instance cannot be registered.
func (i Instance) Validate() error {
	if err := ValidateServiceName(i.Service); err != nil {
		return err
	}
	switch {
	case i.Host == "":
		return fmt.Errorf("%w: %s: empty host", ErrInvalidInstance, i.Service)
	case i.Port < 1 || i.Port > 65535:
		return fmt.Errorf("%w: %s: port %d is not within 1-65535", ErrInvalidInstance, i.Service, i.Port)
	case math.IsNaN(i.Weight) || math.IsInf(i.Weight, 0) || i.Weight < 0:
		return fmt.Errorf("%w: %s %s: weight %v", ErrInvalidInstance, i.Service, i.Addr(), i.Weight)
	}
	return nil
}

// usable returns the usable instances of list, in order.
func usable(list []Instance) []Instance {
	out := make([]Instance, 0, len(list))
	for _, in := range list {
		if in.Usable() {
			out = append(out, in)
		}
	}
	return out
}
