package addr

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/graylb/graylb/internal/libcaddr"
)

// cSpace is C's isspace in the C locale: inet_aton reads a name up to the
// first of these.
const cSpace = " \t\n\v\f\r"

// checkAgainstLibc holds ipv4Numeric to the C library's readings of s:
// getaddrinfo's numeric reading (the one Go's cgo resolver meets) exactly,
// inet_aton's up to the first white space (where inet_aton stops), and it
// holds ParseHost to them: a host the C library reads as an address is
// refused with that address in the error unless it is net/netip's own
// spelling of it.
func checkAgainstLibc(t *testing.T, s string) {
	t.Helper()
	if strings.IndexByte(s, 0) >= 0 { // C reads up to a NUL; no host holds one
		return
	}
	mine, ok := ipv4Numeric(s, false)
	gai, gok := libcaddr.GetaddrinfoNumeric(s)
	if ok != gok || ok && mine.As4() != gai {
		t.Fatalf("%q: ipv4Numeric reads %v, %v; getaddrinfo %v, %v", s, mine, ok, netip.AddrFrom4(gai), gok)
	}
	prefix := s
	if i := strings.IndexAny(s, cSpace); i >= 0 {
		prefix = s[:i]
	}
	mine2, ok2 := ipv4Numeric(prefix, false)
	aton, aok := libcaddr.InetAton(s)
	if ok2 != aok || ok2 && mine2.As4() != aton {
		t.Fatalf("%q: ipv4Numeric reads %q as %v, %v; inet_aton reads %q as %v, %v", s, prefix, mine2, ok2, s, netip.AddrFrom4(aton), aok)
	}
	checkHostReading(t, s)
}

// checkHostReading holds ParseHost and ParseAddress (a rule's reading of a
// host without a port) to ipv4Numeric's reading of s: what the C library reads as an
// address is net/netip's spelling of it, accepted as that address, or is
// refused on both sides with the address in the error; a name accepted is
// no address to the C library, with or without a trailing dot.
func checkHostReading(t *testing.T, s string) {
	t.Helper()
	h, err := ParseHost(s)
	if a, ok := ipv4Numeric(strings.TrimSuffix(s, "."), false); ok {
		switch {
		case s == a.String():
			if err != nil || h.ip != a {
				t.Fatalf("%q: ParseHost = %v, %v; want the address", s, h, err)
			}
		case err == nil:
			t.Fatalf("%q, %v to the C library, accepted as %v", s, a, h)
		case !strings.Contains(err.Error(), "write "+a.String()):
			t.Fatalf("%q, %v to the C library: the error does not say to write it: %v", s, a, err)
		}
	}
	if err == nil && h.name != "" {
		if a, ok := ipv4Numeric(h.name, false); ok {
			t.Fatalf("%q accepted as the name %q, which the C library reads as %v", s, h.name, a)
		}
	}
	if s != "" && !strings.ContainsAny(s, ":[") {
		k, rerr := ParseAddress(s)
		if (err == nil) != (rerr == nil) || err != nil && rerr.Error() != err.Error() || err == nil && k.Host != h {
			t.Fatalf("%q: ParseHost says %v, %v; ParseAddress %v, %v", s, h, err, k.Host, rerr)
		}
	}
}

// The pure-Go reading agrees with the C library on every string of up to 4
// bytes over an alphabet of digits, x, hex letters, dots and white space,
// and on random numbers-and-dots strings around the edges: parts of every
// base, value and count, out of range, empty, signed, trailing junk.
func TestIPv4Numeric_AgreesWithLibc(t *testing.T) {
	if !libcaddr.Available {
		t.Skip("built without cgo: no C library to compare with")
	}
	const alphabet = "0179xXaF. \t"
	var walk func(prefix string, n int)
	walk = func(prefix string, n int) {
		checkAgainstLibc(t, prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			walk(prefix+alphabet[i:i+1], n-1)
		}
	}
	walk("", 4)
	rng := rand.New(rand.NewPCG(5, 7))
	for i := 0; i < 20000; i++ {
		checkAgainstLibc(t, randomNumeric(rng))
	}
}

// FuzzIPv4Numeric_AgainstLibc: on any string, the pure-Go reading agrees
// with getaddrinfo's and inet_aton's, and the hosts refused and accepted
// follow it (see checkAgainstLibc).
func FuzzIPv4Numeric_AgainstLibc(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "0x7f000001", "0x7f.0.0.0x1", "0177.0.0.1", "127.1", "2130706433", "0", "0x", "0x.1",
		"08", "09.1.1.1", "1.2.3.4.", "1.2.3.4 ", "1.2.3.4\t", "1 .2", " 1", "+1", "-1", "1e3", "\u0661", "4294967295", "4294967296",
		"0x100000000", "0xffffffff", "037777777777", "040000000000", "00000000000000000000001", "0x0000000000000000000001",
		"1.16777215", "1.16777216", "1.2.65535", "1.2.65536", "1.256.1", "1..2", ".1", "0X7F.1", "0xg", "1.2.3.0xg", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !libcaddr.Available {
			t.Skip("built without cgo: no C library to compare with")
		}
		checkAgainstLibc(t, s)
	})
}

// randomNumeric returns a string of 1-5 parts in the forms inet_aton
// reads, around their edges, with now and then junk in a part, an empty
// part, a trailing dot or trailing text.
func randomNumeric(rng *rand.Rand) string {
	edges := []uint64{0, 1, 7, 8, 9, 10, 255, 256, 65535, 65536, 1<<24 - 1, 1 << 24, 1<<32 - 1, 1 << 32, 1<<64 - 1}
	parts := make([]string, 1+rng.IntN(5))
	for i := range parts {
		v := edges[rng.IntN(len(edges))]
		if rng.IntN(3) == 0 {
			v = rng.Uint64() >> rng.IntN(64)
		}
		zeros := strings.Repeat("0", rng.IntN(3)*rng.IntN(12))
		switch rng.IntN(8) {
		case 0, 1:
			parts[i] = strconv.FormatUint(v, 10)
		case 2, 3:
			x := strconv.FormatUint(v, 16)
			if rng.IntN(2) == 0 {
				x = strings.ToUpper(x)
			}
			parts[i] = "0x"[:1] + "xX"[rng.IntN(2):][:1] + zeros + x
		case 4, 5:
			parts[i] = "0" + zeros + strconv.FormatUint(v, 8)
		case 6:
			parts[i] = zeros + strconv.FormatUint(v, 10) // leading zeros before decimal: octal, maybe invalid
		default:
			parts[i] = []string{"", "0x", "0X", "x1", "-1", "+1", " 1", "a", "0xg", "08", "1e2", "\u0661", "0b1"}[rng.IntN(13)]
		}
	}
	s := strings.Join(parts, ".")
	switch rng.IntN(10) {
	case 0:
		s += "."
	case 1:
		s += string(cSpace[rng.IntN(len(cSpace))]) + []string{"", "x", "1", ".1"}[rng.IntN(4)]
	case 2:
		s = "." + s
	}
	return s
}

// spellIPv4 writes the address a as form says: in 1-4 parts (the last
// filling the remaining bytes), each decimal, hex (0x or 0X, hex digits
// in either case) or octal, with leading zeros in hex and octal.
func spellIPv4(a [4]byte, form uint64) string {
	v := binary.BigEndian.Uint32(a[:])
	var nums []uint64
	switch form % 4 {
	case 0:
		nums = []uint64{uint64(a[0]), uint64(a[1]), uint64(a[2]), uint64(a[3])}
	case 1:
		nums = []uint64{uint64(a[0]), uint64(a[1]), uint64(v & 0xffff)}
	case 2:
		nums = []uint64{uint64(a[0]), uint64(v & 0xffffff)}
	default:
		nums = []uint64{uint64(v)}
	}
	form /= 4
	parts := make([]string, len(nums))
	for i, n := range nums {
		base, zeros, upper := form%3, strings.Repeat("0", int(form/3%4)), form/12%2 == 1
		form /= 24
		switch base {
		case 0:
			parts[i] = strconv.FormatUint(n, 10)
		case 1:
			x := "0x" + zeros + strconv.FormatUint(n, 16)
			if upper {
				x = strings.ToUpper(x)
			}
			parts[i] = x
		default:
			parts[i] = "0" + zeros + strconv.FormatUint(n, 8)
		}
	}
	return strings.Join(parts, ".")
}

// FuzzIPv4Spellings_AgainstNetip: every spelling of an IPv4 address the C
// library reads (see spellIPv4) reads as the address net/netip makes of
// its bytes; net/netip's own spelling is accepted as that address, as a
// host and in an address with a port; every other spelling, and every
// spelling with a trailing dot, is refused by both with net/netip's
// spelling (and the port) in the error. With cgo,
// the C library reads each spelling so too.
func FuzzIPv4Spellings_AgainstNetip(f *testing.F) {
	f.Add(uint32(0x7f000001), uint64(0))
	f.Add(uint32(0x7f000001), uint64(3+4*1))
	f.Add(uint32(0x0a000007), uint64(1+4*2))
	f.Add(uint32(0xffffffff), uint64(2+4*(1+3*3)))
	f.Add(uint32(0), uint64(1<<40-1))
	f.Fuzz(func(t *testing.T, v uint32, form uint64) {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], v)
		want := netip.AddrFrom4(b)
		s := spellIPv4(b, form)
		got, ok := ipv4Numeric(s, false)
		if !ok || got != want {
			t.Fatalf("%q (%v) reads as %v, %v", s, want, got, ok)
		}
		if p, err := netip.ParseAddr(s); (err == nil) != (s == want.String()) || err == nil && p != want {
			t.Fatalf("%q (%v): netip reads %v, %v", s, want, p, err)
		}
		for _, host := range []string{s, s + "."} {
			_, herr := ParseHost(host)
			_, rerr := ParseAddress(host + ":80")
			if host == want.String() {
				if herr != nil || rerr != nil {
					t.Fatalf("%q refused: %v; %v", host, herr, rerr)
				}
				continue
			}
			if herr == nil || !strings.Contains(herr.Error(), "write "+want.String()) {
				t.Fatalf("host %q (%v): %v", host, want, herr)
			}
			if rerr == nil || !strings.Contains(rerr.Error(), "write "+want.String()+":80") {
				t.Fatalf("address %q (%v): %v", host+":80", want, rerr)
			}
			checkHostReading(t, host)
		}
		if libcaddr.Available {
			checkAgainstLibc(t, s)
		}
	})
}

// FuzzParseHost: on any string, ParseHost and ParseAddress accept and
// refuse the same hosts with the same words and read them alike; an
// IPv4 address net/netip reads is that address; what the C library reads
// as an address is never accepted as a name; a name is the same name with
// one trailing dot; the canonical form reads back as itself.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"localhost", "localhost.", "LocalHost.", "0x7f000001", "0x7f.0.0.0x1", "127.0.0.1", "127.0.0.1.", "010.0.0.7",
		"08.0.0.7", "127.1", "host.123", "a.0x1", "0x.a", ".", "..", "a..", "::1", "fe80::1%eth0", "::ffff:0x7f.0.0.1", "[::1]", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkHostReading(t, s)
		h, err := ParseHost(s)
		if a, perr := netip.ParseAddr(s); perr == nil && a.Is4() {
			if err != nil || h.ip != a {
				t.Fatalf("%q: netip reads %v, ParseHost %v, %v", s, a, h, err)
			}
			if b, ok := ipv4Numeric(s, false); !ok || b != a {
				t.Fatalf("%q: netip reads %v, ipv4Numeric %v, %v", s, a, b, ok)
			}
		}
		if err != nil {
			return
		}
		if again, err := ParseHost(h.String()); err != nil || again != h {
			t.Fatalf("%q is %v, which reads as %v, %v", s, h, again, err)
		}
		if h.name != "" && !strings.HasSuffix(s, ".") {
			if dotted, err := ParseHost(s + "."); err != nil || dotted != h {
				t.Fatalf("%q is %v, %q is %v, %v", s, h, s+".", dotted, err)
			}
		}
	})
}
