package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/graylb/graylb/internal/addr"
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

// A host a gray rule could not name is refused: an IPv4 address with a
// leading zero (octal to some resolvers, decimal to others), an IPv4
// shorthand (10.7, one number), a dotted name whose last label is all
// digits. The rule that names the machine (10.0.0.7) would be accepted and
// never match it, so prod traffic would reach an instance marked gray.
// Every host a rule can name stays valid: host names with digits, IPv4,
// IPv6 in any spelling, IPv4-mapped, zones.
func TestInstance_ValidateRefusesHostsNoRuleCanName(t *testing.T) {
	for _, host := range ambiguousHosts {
		err := NewInstance("svc", host, 8080, nil).Validate()
		assert.ErrorIs(t, err, ErrInvalidInstance, "host %q", host)
	}
	for _, host := range []string{
		"10.0.0.7", "0.0.0.0", "255.255.255.255", "user-svc-0.user-svc.prod.svc.cluster.local", "host-1", "1host", "1-2-3",
		"a.0x1", "0x", "0xg", "1.2.3.0xg", "0x.a", "10.0.0.7-a", "localhost.", "pod-10-0-0-7.ns", "_srv._tcp.host", "UPPER.Case", "x",
		"2001:db8::7", "2001:DB8:0:0:0:0:0:7", "::1", "::ffff:10.0.0.7", "::FFFF:10.0.0.7", "fe80::1%eth0", "fe80::1%eth0.100",
	} {
		assert.NoError(t, NewInstance("svc", host, 8080, nil).Validate(), "host %q", host)
		_, err := addr.ParseAddress(NewInstance("svc", host, 8080, nil).Addr())
		assert.NoError(t, err, "a rule can name %q", host)
	}
}

// ambiguousHosts are hosts of the host-name alphabet that no rule entry can
// name (see addr.ParseHost).
var ambiguousHosts = []string{
	"010.0.0.7", "10.0.0.07", "00.0.0.0", "10.7", "10.0.7", "167772167", "0", "1.2.3.4.5", "256.0.0.1", "10.0.0.300",
	"host.123", "a.b.0", "0x0a.0.0.7", "0x0a", "0x7f000001", "0x7f.0.0.0x1", "0177.0.0.1", "127.0.0.1.",
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
	for _, host := range ambiguousHosts {
		assert.ErrorIs(t, reg.Register(NewInstance("svc", host, 8080, nil)), ErrInvalidInstance, "host %q", host)
	}
	_, err = reg.Instances(context.Background(), "svc")
	assert.ErrorIs(t, err, ErrUnknownService, "nothing was registered")
}

func TestInstance_SameAddr(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		pa   int
		pb   int
		same bool
	}{
		{"10.0.0.7", "10.0.0.7", 80, 80, true},
		{"10.0.0.7", "::ffff:10.0.0.7", 80, 80, true},
		{"2001:DB8:0:0:0:0:0:7", "2001:db8::7", 80, 80, true},
		{"Host-A", "host-a", 80, 80, true},
		{"fe80::1%eth0", "FE80::1%eth0", 80, 80, true},
		{"10.0.0.7", "10.0.0.7", 80, 81, false},
		{"10.0.0.7", "10.0.0.8", 80, 80, false},
		{"fe80::1%eth0", "fe80::1%eth1", 80, 80, false},
		{"fe80::1%eth0", "fe80::1%ETH0", 80, 80, false}, // zones are case-sensitive
		{"010.0.0.7", "10.0.0.7", 80, 80, false},        // no rule could name the first: not one machine
		{"host-a", "host-b", 80, 80, false},
	} {
		a, b := NewInstance("svc", tc.a, tc.pa, nil), NewInstance("svc", tc.b, tc.pb, nil)
		assert.Equal(t, tc.same, a.SameAddr(b), "%s vs %s", a.Addr(), b.Addr())
		assert.Equal(t, tc.same, b.SameAddr(a), "%s vs %s", b.Addr(), a.Addr())
	}
}
