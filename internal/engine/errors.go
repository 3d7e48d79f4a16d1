package engine

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Errors returned by this package wrap one of them; test
// with errors.Is.
var (
	// ErrNoInstance: the request's kind has no instance to pick.
	ErrNoInstance = errors.New("graylb: no instance")
	// ErrInvalidService: the service name is empty or too long.
	ErrInvalidService = errors.New("graylb: invalid service name")
	// ErrUnknownService: the supplier does not know the service.
	ErrUnknownService = errors.New("graylb: unknown service")
	// ErrInvalidInstance: an instance with no host, a bad port or a bad weight.
	ErrInvalidInstance = errors.New("graylb: invalid instance")
	// ErrInvalidRules: a rule document that does not parse or validate.
	ErrInvalidRules = errors.New("graylb: invalid rules")
	// ErrClosed: the LoadBalancer or Cache was closed.
	ErrClosed = errors.New("graylb: closed")
)

// MaxServiceNameLen is the longest service name accepted.
const MaxServiceNameLen = 512

// NoInstanceError is returned when the request's kind has no instance. It
// wraps ErrNoInstance and names the service and the request's kind, and
// the cause when outlier detection ejected instances the request could
// have reached.
type NoInstanceError struct {
	Service string
	Kind    Kind
	Ejected int // instances the request could have reached, ejected as outliers
}

func (e *NoInstanceError) Error() string {
	if e.Ejected > 0 {
		return fmt.Sprintf("graylb: no instance of %q for %s request: %d ejected as outliers", e.Service, e.Kind, e.Ejected)
	}
	return fmt.Sprintf("graylb: no instance of %q for %s request", e.Service, e.Kind)
}

// Is reports whether target is ErrNoInstance.
func (e *NoInstanceError) Is(target error) bool { return target == ErrNoInstance }

// ValidateServiceName returns an error wrapping ErrInvalidService when name
// is empty, longer than MaxServiceNameLen, or holds what could break out of
// a URL host, a header or a log line: anything but printable ASCII (control
// characters, space, bytes of 0x7f and above), one of / \\ ? # % [ ] < > "
// or a backquote, or "..". Nacos group prefixes ("GROUP@@name") and
// Dubbo-style names ("providers:com.acme.Api::") are accepted.
func ValidateServiceName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidService)
	case len(name) > MaxServiceNameLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidService, len(name), MaxServiceNameLen)
	case strings.Contains(name, ".."):
		return fmt.Errorf("%w: %q holds \"..\"", ErrInvalidService, name)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c <= ' ' || c >= 0x7f:
			return fmt.Errorf("%w: %q holds a byte that is not printable ASCII", ErrInvalidService, name)
		case strings.IndexByte(`/\?#%[]<>"`+"`", c) >= 0:
			return fmt.Errorf("%w: %q holds %q", ErrInvalidService, name, c)
		}
	}
	return nil
}
