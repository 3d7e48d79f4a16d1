package engine

import (
	"errors"
	"fmt"
	"strings"
)

// The errors are graylb.ErrNoInstance and the others.
var (
	ErrNoInstance      = errors.New("graylb: no instance")
	ErrInvalidService  = errors.New("graylb: invalid service name")
	ErrUnknownService  = errors.New("graylb: unknown service")
	ErrInvalidInstance = errors.New("graylb: invalid instance")
	ErrInvalidRules    = errors.New("graylb: invalid rules")
	ErrClosed          = errors.New("graylb: closed")
)

// MaxServiceNameLen is graylb.MaxServiceNameLen.
const MaxServiceNameLen = 512

// NoInstanceError is graylb.NoInstanceError.
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

// ValidateServiceName is graylb.ValidateServiceName.
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
