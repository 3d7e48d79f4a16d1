// Package addr reads hosts and host:port addresses into one canonical
// form, so that every spelling of one machine compares equal with ==: the
// gray addresses of the rules and the hosts of instances are read by the
// same functions and accept and refuse the same hosts, with the same
// words.
//
// Contract: ParseHost and ParseAddress accept an IP address as net/netip
// reads it (IPv4-mapped IPv6 unmapped, IPv6 zones kept as written) or a
// host name of dot-separated labels of ASCII letters, digits, '-' and '_'
// (lower-cased, one trailing dot dropped); they refuse, with an error that
// names what to write instead, every other spelling the C library reads as
// an IPv4 address (hex or octal parts, fewer than four parts, one number),
// an IPv4 address with a trailing dot or leading zeros, and a dotted name
// whose last label is all digits. The canonical form (Key.String) reads
// back as itself. Nothing here does I/O or keeps state: every function is
// safe for concurrent use.
//
// Exported identifiers are for the engine only.
package addr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/graylb/graylb/internal/routestate"
)

// Host is a host in canonical form, comparable with ==: an IP address
// (an IPv4-mapped IPv6 address unmapped to IPv4; an IPv6 zone kept as
// written, zones being case-sensitive interface names) or a host name (in
// ASCII lower case, without a trailing dot). Exactly one of ip and name is
// set.
type Host struct {
	ip   netip.Addr
	name string
}

func (h Host) String() string {
	if h.ip.IsValid() {
		return h.ip.String()
	}
	return h.name
}

// Key is a host and a port in canonical form; port 0 stands for every
// port (a rule entry without one).
type Key struct {
	Host Host
	Port uint16
}

// String is the canonical spelling: host, or host:port with an IPv6
// address in brackets ([2001:db8::7]:8080).
func (a Key) String() string {
	if a.Port == 0 {
		return a.Host.String()
	}
	return net.JoinHostPort(a.Host.String(), strconv.Itoa(int(a.Port)))
}

// ParseHost returns the canonical form of a host: an IP address as
// net/netip parses it (IPv6 in any letter case, compressed or not, with
// leading zeros in its groups; IPv4-mapped ones unmapped; IPv4 as four
// decimal numbers within 0-255 without leading zeros), else a host name
// of dot-separated labels of ASCII letters, digits, '-' and '_' (see
// validHost), one trailing dot allowed and dropped (localhost. is
// localhost). It refuses, naming what to write instead, what would not be
// matched as its author means it:
//   - every other spelling the C library reads as an IPv4 address (see
//     ipv4Numeric: hex or octal parts, fewer than four parts, one 32-bit
//     number, 0x7f.0.0.0x1 and 0x7f000001 for 127.0.0.1), with or without
//     a trailing dot: a resolver that asks the C library dials the address
//     (Go's cgo resolver does), one that does not looks the name up; the
//     error names the address the C library reads (a numericHostError);
//   - an IPv4 address with a trailing dot, and one whose parts have
//     leading zeros, octal to the C library and decimal to others (the
//     error names both readings; 08.0.0.1 is no address to the C library
//     and 8.0.0.1 to others);
//   - a dotted name whose last label is all digits (host.123, 1.2.3.4.5,
//     256.0.0.1): neither an IP address nor a host name.
func ParseHost(s string) (Host, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if z := a.Zone(); z != "" && !hostChars(z) {
			return Host{}, fmt.Errorf("zone %q: letters, digits, '-', '_' and '.' only", z)
		}
		return Host{ip: a.Unmap()}, nil
	} else if strings.Contains(s, ":") {
		if strings.Contains(s, "%") {
			return Host{}, fmt.Errorf("not an IPv6 address with a zone (such as fe80::1%%eth0): %v", err)
		}
		return Host{}, fmt.Errorf("not an IP address: %v", err)
	}
	name := strings.TrimSuffix(s, ".")
	libc, isLibc := ipv4Numeric(name, false)
	dec, isDec := ipv4Numeric(name, true)
	if isLibc || isDec {
		e := &numericHostError{host: s, dot: len(name) < len(s)}
		if isLibc {
			e.libc = libc
		}
		if isDec && dec != libc {
			e.decimal = dec
		}
		return Host{}, e
	}
	if name == "" || len(name) > 253 || !validHost(name) {
		return Host{}, errors.New("not an IP address or a host name (dot-separated labels of letters, digits, '-' and '_', at most 253 bytes)")
	}
	if allDigits(name[strings.LastIndexByte(name, '.')+1:]) {
		if strings.Count(name, ".") == 3 && allDigits(strings.ReplaceAll(name, ".", "")) {
			return Host{}, errors.New("not an IPv4 address (four numbers within 0-255)")
		}
		return Host{}, errors.New("its last label is all digits: neither an IP address nor a host name (write an IPv4 address in full, a.b.c.d)")
	}
	return Host{name: routestate.Lower(name)}, nil
}

// ParseAddress returns the canonical form of a rule's address: "host",
// "host:port", "[ipv6]:port" or "[ipv6]", or an IPv6 address without
// brackets (then it has no port: 2001:db8::7:8080 is an address). The host
// is read by ParseHost; the port is a number within 1-65535, leading zeros
// allowed (08080 is 8080).
func ParseAddress(s string) (Key, error) {
	if s == "" {
		return Key{}, errors.New("empty")
	}
	host, port := s, ""
	bracketed := false
	switch {
	case s[0] == '[':
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Key{}, errors.New("no closing bracket")
		}
		host, bracketed = s[1:end], true
		switch rest := s[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			port = rest[1:]
			if port == "" {
				return Key{}, errors.New("empty port")
			}
		default:
			return Key{}, fmt.Errorf("%q after the closing bracket", rest)
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, port = s[:i], s[i+1:]
		if port == "" {
			return Key{}, errors.New("empty port")
		}
	}
	if host == "" {
		return Key{}, errors.New("empty host")
	}
	h, err := ParseHost(host)
	if err != nil {
		var numeric *numericHostError
		if errors.As(err, &numeric) {
			numeric.port = mustPort(port) // what to write, port and all
		}
		return Key{}, err
	}
	if bracketed {
		if a, _ := netip.ParseAddr(host); !a.Is6() {
			return Key{}, fmt.Errorf("brackets are for IPv6 addresses: write %s", Key{Host: h, Port: mustPort(port)})
		}
	}
	k := Key{Host: h}
	if port != "" {
		p, err := parsePort(port)
		if err != nil {
			return Key{}, err
		}
		k.Port = p
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

// Canonical returns the canonical spelling of a rule's address
// (see ParseAddress): 2001:DB8:0::7 is 2001:db8::7, ::ffff:10.0.0.7 is
// 10.0.0.7, HOST-A. is host-a, 10.0.0.7:08080 is 10.0.0.7:8080.
func Canonical(s string) (string, error) {
	k, err := ParseAddress(s)
	if err != nil {
		return "", err
	}
	return k.String(), nil
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

// validHost reports whether h is an IP address (an IPv6 zone of letters,
// digits, '-', '_' and '.' allowed) or a host name: dot-separated labels of
// 1-63 ASCII letters, digits, '-' and '_', not starting or ending with '-',
// at most 253 bytes, without a trailing dot (ParseHost drops one first).
func validHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == "" || hostChars(a.Zone())
	}
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' || !hostChars(label) {
			return false
		}
	}
	return true
}

// hostChars reports whether s holds only ASCII letters, digits, '-', '_'
// and '.'.
func hostChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// Endpoint returns the canonical host and port of an instance at host and
// port, for comparing instances with each other (ejection, the Cache's
// shrink guard): a host ParseHost refuses is kept as it is, and a port
// outside 1-65535 is 0.
func Endpoint(host string, port int) Key {
	h, err := ParseHost(host)
	if err != nil {
		h = Host{name: host}
	}
	k := Key{Host: h}
	if port >= 1 && port <= 65535 {
		k.Port = uint16(port)
	}
	return k
}

// IsIP reports whether h is an IP address (not a host name).
func (h Host) IsIP() bool { return h.ip.IsValid() }

// Zone returns the IPv6 zone of h, "" when it has none.
func (h Host) Zone() string { return h.ip.Zone() }

// WithoutZone returns h without its IPv6 zone.
func (h Host) WithoutZone() Host {
	if h.ip.Zone() == "" {
		return h
	}
	return Host{ip: h.ip.WithZone("")}
}
