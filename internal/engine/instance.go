package engine

import (
	"fmt"
	"math"
	"net"
	"strconv"

	"github.com/graylb/graylb/internal/addr"
)

// Instance is graylb.Instance.
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

// NewInstance is graylb.NewInstance.
func NewInstance(service, host string, port int, metadata map[string]string) Instance {
	return Instance{Service: service, Host: host, Port: port, Weight: 1, Healthy: true, Enabled: true, Metadata: metadata}
}

// Addr returns host:port.
func (i Instance) Addr() string { return net.JoinHostPort(i.Host, strconv.Itoa(i.Port)) }

// SameAddr reports whether i and o are at one host and port, their hosts
// compared in canonical form as gray addresses, ejection and the Cache
// compare instances: 10.0.0.7 and ::ffff:10.0.0.7 are one machine, and so
// are Host-A and host-a, localhost. and localhost, and 2001:DB8:0::7 and
// 2001:db8::7. For a retry's
// tried set (a reroute; see package adapter's Balancer.Reroute): one machine listed under two
// spellings is tried once.
func (i Instance) SameAddr(o Instance) bool {
	if i.Port != o.Port {
		return false
	}
	if i.Host == o.Host {
		return true
	}
	return endpointOf(i).Host == endpointOf(o).Host
}

// Usable reports whether the instance may receive traffic: healthy,
// enabled, and of a positive, finite weight.
func (i Instance) Usable() bool {
	return i.Healthy && i.Enabled && i.Weight > 0 && !math.IsInf(i.Weight, 1)
}

// Validate returns an error wrapping ErrInvalidInstance (or
// ErrInvalidService) when the instance cannot be registered or routed to:
// the host must be an IP address (an IPv6 zone of letters, digits, '-', '_'
// and '.' allowed) or a host name of dot-separated labels of letters,
// digits, '-' and '_', at most 253 bytes, one trailing dot allowed
// (localhost. is the name localhost), so that no pick can build a URL, a
// header or a log line out of it that says more than host:port. A host
// that a gray rule could not name is refused too, so that no instance
// escapes a rule naming its machine (Rules.GrayAddresses): every spelling
// of an IPv4 address but a.b.c.d in decimal without leading zeros — hex or
// octal parts (0x7f.0.0.0x1, 0177.0.0.1), fewer than four parts (127.1),
// one number (0x7f000001, 2130706433), which the C library's resolver
// reads as an address and Go's own looks up as a name — and a dotted name
// whose last label is all digits (host.123). The error says what to write
// instead: "0x7f000001 is 127.0.0.1 to the C library: write 127.0.0.1".
// The rules' gray addresses accept and refuse the same hosts (see
// docs/rules.md).
func (i Instance) Validate() error {
	if err := ValidateServiceName(i.Service); err != nil {
		return err
	}
	return i.validateEndpoint()
}

// validateEndpoint is Validate without the service name: what routing
// reads (host, port, weight).
func (i Instance) validateEndpoint() error {
	if i.Host == "" {
		return fmt.Errorf("%w: %s: empty host", ErrInvalidInstance, i.Service)
	}
	// What a rule entry may not be, an instance may not be: one a gray
	// rule cannot name would stay prod under the rule naming its machine.
	// addr.ParseHost holds a host name's alphabet, so the messages below, which
	// quote the host as it is, inject nothing.
	if _, err := addr.ParseHost(i.Host); err != nil {
		return fmt.Errorf("%w: %s: host %q: %v", ErrInvalidInstance, i.Service, i.Host, err)
	}
	switch {
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
