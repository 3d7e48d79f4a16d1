package engine

import (
	"strings"
	"testing"

	"github.com/graylb/graylb/internal/addr"
)

// checkSides holds both readers of a host, an instance's Validate and a
// rule's gray address, to addr.ParseHost (which package addr holds to the
// C library and net/netip): an instance is refused exactly when the host
// is, quoting ParseHost's words; a rule naming the host alone is refused
// with the same words, or makes the instance at that host gray, whichever
// way it is spelt.
func checkSides(t *testing.T, s string) {
	t.Helper()
	h, err := addr.ParseHost(s)
	ierr := Instance{Service: "svc", Host: s, Port: 80, Weight: 1}.validateEndpoint()
	if (err == nil) != (ierr == nil) || err != nil && s != "" && !strings.Contains(ierr.Error(), err.Error()) {
		t.Fatalf("%q: addr.ParseHost says %v, an instance %v", s, err, ierr)
	}
	if s == "" || strings.ContainsAny(s, ":[") {
		return
	}
	c, rerr := compileRules(Rules{GrayAddresses: []string{s}})
	if (err == nil) != (rerr == nil) || err != nil && !strings.Contains(rerr.Error(), err.Error()) {
		t.Fatalf("%q: addr.ParseHost says %v, a rule %v", s, err, rerr)
	}
	if err != nil {
		return
	}
	for _, host := range []string{s, h.String()} {
		if !c.grayAddress(Instance{Host: host, Port: 80}) {
			t.Fatalf("rule %q does not make the instance at %q gray", s, host)
		}
	}
}

// Instances and rules accept and refuse the same hosts, with the same
// words, on every string of up to 4 bytes over an alphabet of digits, x,
// hex letters, dots and white space, and on the numeric spellings the C
// library reads.
func TestHost_BothSidesAgree(t *testing.T) {
	const alphabet = "0179xXaF. \t"
	var walk func(prefix string, n int)
	walk = func(prefix string, n int) {
		checkSides(t, prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			walk(prefix+alphabet[i:i+1], n-1)
		}
	}
	walk("", 4)
	for _, tc := range numericSpellings {
		checkSides(t, tc.host)
	}
}

// FuzzHost_BothSides: on any string, the rules and the instances accept
// and refuse the same hosts with the same words and read them alike (see
// checkSides; package addr's FuzzParseHost holds the reading itself).
func FuzzHost_BothSides(f *testing.F) {
	for _, s := range []string{"localhost", "localhost.", "LocalHost.", "0x7f000001", "0x7f.0.0.0x1", "127.0.0.1", "127.0.0.1.", "010.0.0.7",
		"08.0.0.7", "127.1", "host.123", "a.0x1", "0x.a", ".", "..", "a..", "::1", "fe80::1%eth0", "::ffff:0x7f.0.0.1", "[::1]", "",
		"0X7F.0.0X0.01", "017700000001", "0x7f.1.", "2130706433"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkSides(t, s)
	})
}
