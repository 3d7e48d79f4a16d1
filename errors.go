package graylb

import "github.com/graylb/graylb/internal/engine"

// Sentinel errors. Errors returned by this package wrap one of them; test
// with errors.Is.
var (
	// ErrNoInstance: the request's kind has no instance to pick.
	ErrNoInstance = engine.ErrNoInstance
	// ErrInvalidService: the service name is empty or too long.
	ErrInvalidService = engine.ErrInvalidService
	// ErrUnknownService: the supplier does not know the service.
	ErrUnknownService = engine.ErrUnknownService
	// ErrInvalidInstance: an instance with no host, a bad port or a bad weight.
	ErrInvalidInstance = engine.ErrInvalidInstance
	// ErrInvalidRules: a rule document that does not parse or validate.
	ErrInvalidRules = engine.ErrInvalidRules
	// ErrClosed: the LoadBalancer or Cache was closed.
	ErrClosed = engine.ErrClosed
)

const // MaxServiceNameLen is the longest service name accepted.
MaxServiceNameLen = engine.MaxServiceNameLen

// NoInstanceError is returned when the request's kind has no instance. It
// wraps ErrNoInstance and names the service and the request's kind, and
// the cause when outlier detection ejected instances the request could
// have reached.
type NoInstanceError = engine.NoInstanceError

// ValidateServiceName returns an error wrapping ErrInvalidService when name
// is empty, longer than MaxServiceNameLen, or holds what could break out of
// a URL host, a header or a log line: anything but printable ASCII (control
// characters, space, bytes of 0x7f and above), one of / \\ ? # % [ ] < > "
// or a backquote, or "..". Nacos group prefixes ("GROUP@@name") and
// Dubbo-style names ("providers:com.acme.Api::") are accepted.
func ValidateServiceName(name string) error {
	return engine.ValidateServiceName(name)
}
