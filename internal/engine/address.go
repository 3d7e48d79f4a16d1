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
		return hostKey{}, e
	}
	if name == "" || len(name) > 253 || !validHost(name) {
		return hostKey{}, errors.New("not an IP address or a host name (dot-separated labels of letters, digits, '-' and '_', at most 253 bytes)")
	}
	if allDigits(name[strings.LastIndexByte(name, '.')+1:]) {
		if strings.Count(name, ".") == 3 && allDigits(strings.ReplaceAll(name, ".", "")) {
			return hostKey{}, errors.New("not an IPv4 address (four numbers within 0-255)")
		}
		return hostKey{}, errors.New("its last label is all digits: neither an IP address nor a host name (write an IPv4 address in full, a.b.c.d)")
	}
	return hostKey{name: lowerASCII(name)}, nil
}

// numericHostError refuses a host that is an IPv4 address to the C library
// or to a reader of decimal parts, spelt otherwise than net/netip spells
// that address. Its text names what to write.
type numericHostError struct {
	host    string     // as written
	libc    netip.Addr // the C library's reading; invalid: it reads none
	decimal netip.Addr // the reading with every part decimal, when another; invalid: none
	dot     bool       // host ends in a dot (dropped before reading)
	port    uint16     // the port of the rule entry the host came with; 0: none
}

func (e *numericHostError) write(a netip.Addr) string {
	return addrKey{host: hostKey{ip: a}, port: e.port}.String()
}

func (e *numericHostError) Error() string {
	switch {
	case e.libc.IsValid() && e.decimal.IsValid():
		return fmt.Sprintf("%s is %s to the C library (a part with a leading zero is octal) and %s to readers of decimal: write %s or %s, whichever is meant",
			e.host, e.libc, e.decimal, e.write(e.libc), e.write(e.decimal))
	case e.decimal.IsValid():
		return fmt.Sprintf("%s is no IPv4 address to the C library (a part with a leading zero is octal) but %s to readers of decimal: write %s if that is meant",
			e.host, e.decimal, e.write(e.decimal))
	case e.dot && e.host[:len(e.host)-1] == e.libc.String():
		return fmt.Sprintf("an IP address with a trailing dot: write %s", e.write(e.libc))
	case e.dot:
		return fmt.Sprintf("%s is %s to the C library once its trailing dot is dropped: write %s", e.host, e.libc, e.write(e.libc))
	}
	return fmt.Sprintf("%s is %s to the C library: write %s", e.host, e.libc, e.write(e.libc))
}

// ipv4Numeric reads s as the C library reads a number-and-dots host name:
// glibc's inet_aton (the reading getaddrinfo, and so Go's cgo resolver,
// and gethostbyname give a whole host name before any lookup). s is 1-4
// parts separated by single dots, nothing before, between or after them.
// Each part starts with a decimal digit and is, as C's strtoul reads it
// with base 0, 0x or 0X followed by hex digits (either case), 0 followed by
// octal digits, or a decimal number; every part but the last is one byte
// (at most 255), and the last fills the bytes that remain: a.b.c.d, a.b.c
// (c of 16 bits), a.b (b of 24 bits), a (32 bits). Leading zeros are
// allowed in any number (0x00ff, 000377); a part out of range refuses s.
// (inet_aton itself also stops at a space or other ASCII white space and
// reads what came before it; getaddrinfo does not, and neither does this
// reading.)
//
// With decimal, every part is read as a decimal number instead, leading
// zeros ignored (010 is 10) and no 0x: the reading of a parser that knows
// no octal or hex.
func ipv4Numeric(s string, decimal bool) (netip.Addr, bool) {
	var word uint32 // the bytes of the parts before the last, in place
	parts := 0
	i := 0
	for {
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return netip.Addr{}, false
		}
		base := uint64(10)
		if !decimal && s[i] == '0' {
			base = 8
			if i+2 < len(s) && s[i+1]|0x20 == 'x' && hexDigit(s[i+2]) < 16 {
				base, i = 16, i+2
			}
		}
		var v uint64 // saturates above 32 bits
		for ; i < len(s); i++ {
			d := hexDigit(s[i])
			if d >= base {
				break
			}
			if v = v*base + d; v > 1<<32 {
				v = 1 << 32
			}
		}
		if i < len(s) && s[i] == '.' {
			if parts == 3 || v > 0xff {
				return netip.Addr{}, false
			}
			word |= uint32(v) << (24 - 8*parts)
			parts++
			i++
			continue
		}
		if i != len(s) || v > 0xffffffff>>(8*parts) {
			return netip.Addr{}, false
		}
		word |= uint32(v)
		return netip.AddrFrom4([4]byte{byte(word >> 24), byte(word >> 16), byte(word >> 8), byte(word)}), true
	}
}

// hexDigit returns the value of the hex digit c (either case), or 16 when c
// is none.
func hexDigit(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= c|0x20 && c|0x20 <= 'f':
		return uint64(c|0x20-'a') + 10
	}
	return 16
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
		var numeric *numericHostError
		if errors.As(err, &numeric) {
			numeric.port = mustPort(port) // what to write, port and all
		}
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
