package engine

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/graylb/graylb/internal/routestate"
)

// hostKey is a host in canonical form, comparable with ==: an IP address
// (an IPv4-mapped IPv6 address unmapped to IPv4; an IPv6 zone kept as
// written, zones being case-sensitive interface names) or a host name (in
// ASCII lower case, without a trailing dot). Exactly one of ip and name is
// set.
type hostKey struct {
	ip   netip.Addr
	name string
}

func (h hostKey) String() string {
	if h.ip.IsValid() {
		return h.ip.String()
	}
	return h.name
}

// addrKey is a host and a port in canonical form; port 0 stands for every
// port (a rule entry without one).
type addrKey struct {
	host hostKey
	port uint16
}

// String is the canonical spelling: host, or host:port with an IPv6
// address in brackets ([2001:db8::7]:8080).
func (a addrKey) String() string {
	if a.port == 0 {
		return a.host.String()
	}
	return net.JoinHostPort(a.host.String(), strconv.Itoa(int(a.port)))
}

// parseHost returns the canonical form of a host: an IP address as
// net/netip parses it (IPv6 in any letter case, compressed or not, with
// leading zeros in its groups; IPv4-mapped ones unmapped), else a host
// name of dot-separated labels of ASCII letters, digits, '-' and '_'
// (see validHost), one trailing dot allowed. It refuses, naming what to
// write instead, what would not be matched as its author means it: an
// IPv4 address with leading zeros (octal to some resolvers, decimal to
// others), a dotted name whose last label is all digits (an IPv4 shorthand
// such as 10.7, not a host name), an IP address with a trailing dot.
func parseHost(s string) (hostKey, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if z := a.Zone(); z != "" && !hostChars(z) {
			return hostKey{}, fmt.Errorf("zone %q: letters, digits, '-', '_' and '.' only", z)
		}
		return hostKey{ip: a.Unmap()}, nil
	} else if strings.Contains(s, ":") {
		if strings.Contains(s, "%") {
			return hostKey{}, fmt.Errorf("not an IPv6 address with a zone (such as fe80::1%%eth0): %v", err)
		}
		return hostKey{}, fmt.Errorf("not an IP address: %v", err)
	}
	name := strings.TrimSuffix(s, ".")
	if a, err := netip.ParseAddr(name); err == nil {
		return hostKey{}, fmt.Errorf("an IP address with a trailing dot: write %s", a.Unmap())
	}
	if name == "" || len(name) > 253 || !validHost(name) {
		return hostKey{}, errors.New("not an IP address or a host name (dot-separated labels of letters, digits, '-' and '_', at most 253 bytes)")
	}
	labels := strings.Split(name, ".")
	if allDigits(labels[len(labels)-1]) {
		numeric := len(labels) == 4
		zero := false
		for _, l := range labels {
			numeric = numeric && allDigits(l)
			zero = zero || len(l) > 1 && l[0] == '0'
		}
		if numeric && zero {
			return hostKey{}, errors.New("an IPv4 address with a leading zero is ambiguous (octal to some resolvers, decimal to others): write it without leading zeros")
		}
		if numeric {
			return hostKey{}, errors.New("not an IPv4 address (four numbers within 0-255)")
		}
		return hostKey{}, errors.New("its last label is all digits: neither an IP address nor a host name (write an IPv4 address in full, a.b.c.d)")
	}
	return hostKey{name: lowerASCII(name)}, nil
}

// parseAddress returns the canonical form of a rule's address: "host",
// "host:port", "[ipv6]:port" or "[ipv6]", or an IPv6 address without
// brackets (then it has no port: 2001:db8::7:8080 is an address). The host
// is read by parseHost; the port is a number within 1-65535, leading zeros
// allowed (08080 is 8080).
func parseAddress(s string) (addrKey, error) {
	if s == "" {
		return addrKey{}, errors.New("empty")
	}
	host, port := s, ""
	bracketed := false
	switch {
	case s[0] == '[':
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return addrKey{}, errors.New("no closing bracket")
		}
		host, bracketed = s[1:end], true
		switch rest := s[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			port = rest[1:]
			if port == "" {
				return addrKey{}, errors.New("empty port")
			}
		default:
			return addrKey{}, fmt.Errorf("%q after the closing bracket", rest)
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, port = s[:i], s[i+1:]
		if port == "" {
			return addrKey{}, errors.New("empty port")
		}
	}
	if host == "" {
		return addrKey{}, errors.New("empty host")
	}
	h, err := parseHost(host)
	if err != nil {
		return addrKey{}, err
	}
	if bracketed {
		if a, _ := netip.ParseAddr(host); !a.Is6() {
			return addrKey{}, fmt.Errorf("brackets are for IPv6 addresses: write %s", addrKey{host: h, port: mustPort(port)})
		}
	}
	k := addrKey{host: h}
	if port != "" {
		p, err := parsePort(port)
		if err != nil {
			return addrKey{}, err
		}
		k.port = p
	}
	return k, nil
}

// parsePort reads a port: decimal digits only (no sign), within 1-65535;
// leading zeros are allowed.
func parsePort(s string) (uint16, error) {
	if !allDigits(s) {
		return 0, fmt.Errorf("port %q is not a number within 1-65535", s)
	}
	t := strings.TrimLeft(s, "0")
	n := 0
	if len(t) <= 5 {
		n, _ = strconv.Atoi(t)
	}
	if n < 1 || n > 65535 || len(t) > 5 {
		return 0, fmt.Errorf("port %s is not within 1-65535", s)
	}
	return uint16(n), nil
}

// mustPort is parsePort for an error message: 0 when s is not a port.
func mustPort(s string) uint16 {
	p, _ := parsePort(s)
	return p
}

// canonicalAddress returns the canonical spelling of a rule's address
// (see parseAddress): 2001:DB8:0::7 is 2001:db8::7, ::ffff:10.0.0.7 is
// 10.0.0.7, HOST-A. is host-a, 10.0.0.7:08080 is 10.0.0.7:8080.
func canonicalAddress(s string) (string, error) {
	k, err := parseAddress(s)
	if err != nil {
		return "", err
	}
	return k.String(), nil
}

// endpointOf returns the canonical host and port of an instance, for
// comparing instances with each other (ejection, the Cache's shrink guard);
// a host parseHost refuses is kept as it is.
func endpointOf(in Instance) addrKey {
	h, err := parseHost(in.Host)
	if err != nil {
		h = hostKey{name: in.Host}
	}
	k := addrKey{host: h}
	if in.Port >= 1 && in.Port <= 65535 {
		k.port = uint16(in.Port)
	}
	return k
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// lowerASCII returns s in ASCII lower case; s itself (no copy) when it
// has no upper-case letter.
func lowerASCII(s string) string { return routestate.Lower(s) }
