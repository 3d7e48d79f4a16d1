package graylb

import "github.com/graylb/graylb/internal/engine"

// Instance is one registered instance of a service:
//
//	Service  string
//	Host     string            // an IP address or a host name
//	Port     int               // 1-65535
//	Weight   float64           // the registry's weight; 0 gets no traffic
//	Healthy  bool
//	Enabled  bool
//	Cluster  string
//	Metadata map[string]string // gray=true marks a gray instance (WithGrayKey)
//
// and its methods:
//
//	Addr() string             // host:port
//	SameAddr(o Instance) bool // one host and port, hosts compared in canonical form
//	Usable() bool             // healthy, enabled, positive finite weight
//	Validate() error          // why it cannot be registered or routed to
//
// Only usable instances that validate are routed to. Validate refuses,
// with an error wrapping ErrInvalidInstance that says what to write
// instead, a host that is neither an IP address nor a host name, and a
// host that Rules.GrayAddresses could not name, such as an IPv4 address
// not written as a.b.c.d in decimal (0x7f000001, 127.1, 010.0.0.7);
// docs/rules.md lists them. Once handed to graylb, an Instance and its
// Metadata are read-only.
type Instance = engine.Instance

// NewInstance returns a healthy, enabled instance of weight 1, the
// defaults a registry gives a registration.
func NewInstance(service, host string, port int, metadata map[string]string) Instance {
	return engine.NewInstance(service, host, port, metadata)
}

// Supplier gives the instance lists of services and tells of changes:
//
//	Instances(ctx context.Context, service string) ([]Instance, error)
//	Watch(service string, fn func([]Instance)) (stop func(), err error)
//
// Instances gives an error wrapping ErrUnknownService for a service it
// does not know. Watch calls fn with the whole list each time it changes,
// never twice at once for one service, until stop is called. Lists handed
// over are read-only from then on. Implementations must be safe for
// concurrent use. The Registry and the nacos module's Supplier implement
// it.
//
// A Supplier whose registry can lose its lists and fill them again (a
// restarted registry server) may also have RefillUntil() time.Time: the
// end of the refill under way, zero or past when settled. It must be
// cheap and safe for concurrent use; the Cache asks it on list changes
// and then holds a sudden shrink only during a refill (see Cache).
type Supplier = engine.Supplier

// Registry is the in-memory Supplier, for programs and tests that run
// without a registry server. Instances are keyed by service and host:port:
//
//	Register(inst Instance) error                          // adds or replaces; refuses what Instance.Validate refuses
//	Deregister(service, addr string) error                 // addr is host:port
//	Update(service, addr string, fn func(*Instance)) error // Service, Host and Port cannot change
//	SetMetadata(service, addr, key, value string) error
//
// Watchers are called synchronously, in order, after each change. It is
// safe for concurrent use.
type Registry = engine.Registry

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return engine.NewRegistry() }
