package graylb

import "github.com/graylb/graylb/internal/engine"

// Errors. The errors graylb returns wrap one of them: test with errors.Is.
var (
	ErrNoInstance      = engine.ErrNoInstance      // the request's kind has no instance (see NoInstanceError)
	ErrInvalidService  = engine.ErrInvalidService  // a name ValidateServiceName refuses
	ErrUnknownService  = engine.ErrUnknownService  // the Supplier does not know the service
	ErrInvalidInstance = engine.ErrInvalidInstance // an instance Instance.Validate refuses
	ErrInvalidRules    = engine.ErrInvalidRules    // rules that do not parse or validate
	ErrClosed          = engine.ErrClosed          // the LoadBalancer or Cache is closed
)

// NoInstanceError is the error of a pick whose request kind has no
// instance: {Service string; Kind Kind; Ejected int}, Ejected counting
// the instances it could have reached that outlier detection ejected. It
// wraps ErrNoInstance; its text names the service and the kind.
type NoInstanceError = engine.NoInstanceError

// ValidateServiceName returns an error wrapping ErrInvalidService when
// name is empty, longer than MaxServiceNameLen, or holds what could break
// out of a URL host, a header or a log line: anything but printable ASCII,
// one of / \ ? # % [ ] < > " or a backquote, or "..". Nacos group
// prefixes ("GROUP@@name") and Dubbo-style names
// ("providers:com.acme.Api::") are accepted.
func ValidateServiceName(name string) error { return engine.ValidateServiceName(name) }
