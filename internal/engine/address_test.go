package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/graylb/graylb/internal/addr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A gray address written in any spelling of the instance's address makes
// that instance gray: prod never reaches it, gray requests do.
func TestGrayAddresses_EverySpellingMatches(t *testing.T) {
	for _, tc := range []struct {
		host  string // the instance's
		port  int
		entry string // the rule's
	}{
		// The spellings of issue 23 (each accepted and never matched).
		{"2001:db8:0:0:0:0:0:7", 8080, "2001:db8::7"},
		{"2001:db8::7", 8080, "2001:DB8::7"},
		{"::ffff:10.0.0.7", 8080, "10.0.0.7"},
		{"HOST-A", 8080, "host-a"},
		{"host-a", 8080, "HOST-A"},
		{"host-a.example.com", 8080, "host-a.example.com."},
		{"10.0.0.7", 8080, "10.0.0.7:08080"},
		// And with a port, in brackets, mapped, zoned.
		{"2001:db8::7", 8080, "[2001:db8:0::7]:8080"},
		{"2001:db8::7", 8080, "[2001:DB8::7]"},
		{"2001:0db8:0000::0007", 8080, "[2001:db8::7]:008080"},
		{"10.0.0.7", 8080, "::ffff:10.0.0.7"},
		{"10.0.0.7", 8080, "[::ffff:a00:7]:8080"},
		{"::FFFF:10.0.0.7", 8080, "10.0.0.7:8080"},
		{"Host-A.Example.COM", 8080, "host-a.example.com.:8080"},
		{"fe80::1%eth0", 8080, "fe80::1"},
		{"fe80::1%eth0", 8080, "[fe80::1%eth0]:8080"},
		{"fe80::1", 8080, "fe80::1%eth0"},
	} {
		t.Run(tc.host+"~"+tc.entry, func(t *testing.T) {
			marked := NewInstance("svc", tc.host, tc.port, nil)
			other := NewInstance("svc", "192.0.2.99", 9999, nil)
			lb, _ := newTestLB(t, []Instance{marked, other}, WithRules(Rules{GrayAddresses: []string{tc.entry}}))
			reached := 0
			for i := 0; i < 20; i++ {
				in, err := lb.Pick(context.Background(), "svc")
				require.NoError(t, err)
				if in.Host == tc.host {
					reached++
				}
			}
			assert.Zero(t, reached, "prod picks that reached the instance the rule %q marks gray", tc.entry)
			in, err := lb.Pick(WithValue(context.Background(), "gray", "true"), "svc")
			require.NoError(t, err)
			assert.Equal(t, tc.host, in.Host, "a gray request reaches the gray address")
		})
	}
}

// A rule entry that names an instance's address in another way does not
// make it gray: another port, another zone, another host.
func TestGrayAddresses_OtherAddressesDoNotMatch(t *testing.T) {
	for _, tc := range []struct {
		host  string
		port  int
		entry string
	}{
		{"10.0.0.7", 8080, "10.0.0.7:8081"},
		{"10.0.0.7", 8080, "10.0.0.8"},
		{"10.0.0.7", 8080, "::10.0.0.7"}, // IPv4-compatible, not mapped: another address
		{"2001:db8::7", 8080, "2001:db8::7:8080"},
		{"fe80::1%eth0", 8080, "fe80::1%eth1"},
		{"host-a", 8080, "host-a.example.com"},
		{"host-a.example.com", 8080, "host-a"},
		{"host-a", 8080, "host-b"},
	} {
		c, err := compileRules(Rules{GrayAddresses: []string{tc.entry}})
		require.NoError(t, err, tc.entry)
		assert.False(t, c.grayAddress(NewInstance("svc", tc.host, tc.port, nil)), "%s:%d under %q", tc.host, tc.port, tc.entry)
	}
}

// A rule entry graylb would not match as its author means it is refused,
// and the error says what to write.
func TestGrayAddresses_RefusesAmbiguousForms(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{"010.0.0.7", "leading zero"},
		{"10.0.0.7.", "10.0.0.7"},
		{"10.7", "write 10.0.0.7"},
		{"0x0a.0.0.7", "write 10.0.0.7"},
		{"1.2.3.4.5", "last label"},
		{"host-a:+80", "port"},
		{"host-a:0", "1-65535"},
		{"host-a:65536", "1-65535"},
		{"[10.0.0.7]:80", "brackets"},
		{"[host-a]:80", "brackets"},
		{"host..a", "host name"},
		{"host-a..", "host name"},
		{"<script>", "host name"},
		{"höst", "host name"},
		{"fe80::1%", "zone"},
		{"[fe80::1%e/0]:80", "zone"},
	} {
		_, err := ParseRules([]byte(fmt.Sprintf(`{"grayAddresses":[%q]}`, tc.entry)))
		if assert.ErrorIs(t, err, ErrInvalidRules, "%q accepted", tc.entry) {
			assert.Contains(t, err.Error(), tc.want, "%q", tc.entry)
		}
	}
}

// spelling is one way to write an instance's address in a rule.
type spelling struct {
	text     string
	withPort bool
}

// spellings returns ways to write the address of an instance at host
// (canonical: as netip or the lower-case name prints it), with and without
// port: every one names that instance.
func spellings(rng *rand.Rand, host string, port int) []spelling {
	var hosts []string // host only, no brackets
	var bracketed []string
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4() {
			hosts = append(hosts, a.String(), "::ffff:"+a.String(), "::FFFF:"+a.String(),
				netip.AddrFrom16(a.As16()).StringExpanded())
		} else {
			full := a.StringExpanded() // 2001:0db8:0000:...
			hosts = append(hosts, a.String(), strings.ToUpper(a.String()), full, strings.ToUpper(full), unpadded(full))
		}
		for _, h := range hosts {
			if strings.Contains(h, ":") {
				bracketed = append(bracketed, "["+h+"]")
			}
		}
	} else {
		hosts = append(hosts, host, strings.ToUpper(host), randomCase(rng, host), host+".", randomCase(rng, host)+".")
	}
	var out []spelling
	for _, h := range append(hosts, bracketed...) {
		out = append(out, spelling{text: h})
	}
	ports := []string{strconv.Itoa(port), "0" + strconv.Itoa(port), "000" + strconv.Itoa(port)}
	for _, h := range hosts {
		for _, p := range ports {
			if strings.Contains(h, ":") {
				out = append(out, spelling{"[" + h + "]:" + p, true})
			} else {
				out = append(out, spelling{h + ":" + p, true})
			}
		}
	}
	return out
}

// unpadded writes each group of an expanded IPv6 address without its
// leading zeros and without compression: 2001:db8:0:0:0:0:0:7.
func unpadded(full string) string {
	groups := strings.Split(full, ":")
	for i, g := range groups {
		if g = strings.TrimLeft(g, "0"); g == "" {
			g = "0"
		}
		groups[i] = g
	}
	return strings.Join(groups, ":")
}

func randomCase(rng *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' && rng.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func randomHost(rng *rand.Rand) string {
	switch rng.IntN(3) {
	case 0:
		var b [4]byte
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return netip.AddrFrom4(b).String()
	case 1:
		var b [16]byte
		for i := range b {
			if rng.IntN(3) > 0 { // zero runs, so that :: appears
				b[i] = byte(rng.IntN(256))
			}
		}
		a := netip.AddrFrom16(b)
		if a.Is4In6() {
			return a.Unmap().String()
		}
		return a.String()
	}
	labels := make([]string, 1+rng.IntN(3))
	for i := range labels {
		n := 1 + rng.IntN(8)
		l := make([]byte, n)
		for j := range l {
			l[j] = "abcdefghijklmnopqrstuvwxyz0123456789-"[rng.IntN(37)]
		}
		l[0], l[n-1] = 'a'+byte(rng.IntN(26)), 'a'+byte(rng.IntN(26)) // a letter each end: a name, not a number
		labels[i] = string(l)
	}
	return strings.Join(labels, ".")
}

// otherHost returns a host that is not host: one bit or letter changed.
func otherHost(rng *rand.Rand, host string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		b := a.AsSlice()
		i := rng.IntN(len(b))
		b[i] ^= 1 << rng.IntN(8)
		o, _ := netip.AddrFromSlice(b)
		return o.Unmap().String()
	}
	b := []byte(host)
	i := rng.IntN(len(b))
	if b[i] == 'z' || b[i] == '.' || b[i] == '-' {
		return host + "x"
	}
	if '0' <= b[i] && b[i] <= '8' || 'a' <= b[i] && b[i] < 'z' {
		b[i]++
	} else {
		b[i] = 'a'
	}
	return string(b)
}

// Property: for random IPv4 and IPv6 addresses and host names, every
// equivalent spelling in the rule makes the instance gray (whichever
// equivalent spelling the instance uses); the same spellings of another
// host or another port do not.
func TestGrayAddresses_PropertyEquivalentSpellings(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 3))
	for n := 0; n < 300; n++ {
		host := randomHost(rng)
		port := 1 + rng.IntN(65535)
		instSpellings := []string{host}
		if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
			instSpellings = append(instSpellings, "::ffff:"+host)
		} else if err == nil {
			instSpellings = append(instSpellings, a.StringExpanded())
		} else {
			instSpellings = append(instSpellings, strings.ToUpper(host))
		}
		other := otherHost(rng, host)
		otherPort := port%65535 + 1
		for _, sp := range spellings(rng, host, port) {
			s := sp.text
			c, err := compileRules(Rules{GrayAddresses: []string{s}})
			require.NoError(t, err, "rule %q (for %s:%d)", s, host, port)
			for _, ih := range instSpellings {
				require.True(t, c.grayAddress(NewInstance("svc", ih, port, nil)), "rule %q, instance %s port %d", s, ih, port)
				require.False(t, c.grayAddress(NewInstance("svc", other, port, nil)), "rule %q, another instance %s port %d", s, other, port)
			}
			if sp.withPort {
				require.False(t, c.grayAddress(NewInstance("svc", host, otherPort, nil)), "rule %q, instance %s on another port %d", s, host, otherPort)
			}
		}
	}
}

// FuzzCanonicalAddress: an entry the canonicaliser accepts, the rules
// accept too, and it names the instance at its canonical host and port
// (the canonical form itself is package addr's FuzzCanonical).
func FuzzCanonicalAddress(f *testing.F) {
	for _, s := range []string{"2001:db8:0:0:0:0:0:7", "2001:DB8::7", "::ffff:10.0.0.7", "HOST-A", "host-a.example.com.",
		"10.0.0.7:08080", "[2001:db8::7]:8080", "[fe80::1%eth0]:80", "fe80::1%eth0", "010.0.0.7", "[10.0.0.7]:80",
		"host:+1", "[::]:0", "a:b:c", "[", "]", "%", ":", "[::ffff:1.2.3.4]", "h:0065535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := addr.Canonical(s)
		if err != nil {
			return
		}
		k, _ := addr.ParseAddress(c)
		port := int(k.Port)
		if port == 0 {
			port = 1
		}
		host := k.Host.String()
		r, err := compileRules(Rules{GrayAddresses: []string{s}})
		if err != nil {
			t.Fatalf("%q canonicalises (%q) but the rules refuse it: %v", s, c, err)
		}
		if !r.grayAddress(Instance{Host: host, Port: port}) {
			t.Fatalf("rule %q does not make the instance at %s port %d gray", s, host, port)
		}
	})
}
