package graylb

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hosts and service names end up in URLs, headers and log lines: anything
// that could inject into them is refused where it enters.
func TestInstance_ValidateRefusesInjection(t *testing.T) {
	for _, host := range []string{
		"evil.com/x?y=", "\r\nX: y", "a b", "h\x00", "user@host", "host#frag", "host?q", "h/", `h\x`,
		"h\t", "[::1]", "h:80", "1.2.3.4:80", "host%", "ü.example", strings.Repeat("a", 300),
		"fe80::1%\r\nX-Evil: 1", "fe80::1%a/b?c#d", "fe80::1%@evil.com", "-bad", "bad-", "a..b", ".", "a." + strings.Repeat("b", 64),
	} {
		err := NewInstance("svc", host, 80, nil).Validate()
		assert.ErrorIs(t, err, ErrInvalidInstance, "host %q", host)
	}
	reliabilityFragment(t, "hostile-09-names", "| 9. hosts like `evil.com/x?y=` and `\\r\\nX: y`, service names with `/`, NUL, CR/LF, `..`, space, `?`, `#`: refused by the registry, and dropped with a log line when they come from Nacos | TestInstance_ValidateRefusesInjection, TestValidateServiceName_RefusesInjection, TestRegistry_RefusesInjectedInput, TestSupplier_DropsInvalidHostsWithALogLine | 16 hosts, 13 names | 0 registered |\n")
	for _, host := range []string{"127.0.0.1", "::1", "fe80::1%eth0", "user-service", "a.b-c.d", "pod_1.ns", "UPPER.case"} {
		assert.NoError(t, NewInstance("svc", host, 80, nil).Validate(), "host %q", host)
	}
}

func TestValidateServiceName_RefusesInjection(t *testing.T) {
	for _, name := range []string{"", "a/b", "a\x00", "a\r\nb", "a\nb", "..", "a..b", "a b", "a\tb", "a\x7f", "a?b", "a#b", `a\b`, strings.Repeat("a", MaxServiceNameLen+1),
		"a%2Fb", "a[b]", "a<b>", `a"b`, "a`b", "svc-\u00e9", "a\u202eb", "\xff"} {
		err := ValidateServiceName(name)
		require.Error(t, err, "%q", name)
		assert.True(t, errors.Is(err, ErrInvalidService), "%q: %v", name, err)
	}
	// Nacos group prefixes and Dubbo-style names are service names.
	for _, name := range []string{"user-service", "DEFAULT_GROUP@@user-service", "providers:com.acme.UserService::", "a.b", "svc_1"} {
		assert.NoError(t, ValidateServiceName(name), "%q", name)
	}
}

func TestRegistry_RefusesInjectedInput(t *testing.T) {
	reg := NewRegistry()
	assert.ErrorIs(t, reg.Register(NewInstance("svc", "evil.com/x?y=", 80, nil)), ErrInvalidInstance)
	assert.ErrorIs(t, reg.Register(NewInstance("svc", "\r\nX: y", 80, nil)), ErrInvalidInstance)
	assert.ErrorIs(t, reg.Register(NewInstance("a/../b", "127.0.0.1", 80, nil)), ErrInvalidService)
	assert.ErrorIs(t, reg.Register(NewInstance("a\r\nb", "127.0.0.1", 80, nil)), ErrInvalidService)
	//lint:ignore SA1012 a nil context is accepted
	_, err := reg.Instances(nil, "svc")
	assert.ErrorIs(t, err, ErrUnknownService, "nothing was registered")
}
