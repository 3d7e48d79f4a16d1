package addr

import (
	"fmt"
	"net/netip"
)

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
	return Key{Host: Host{ip: a}, Port: e.port}.String()
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
