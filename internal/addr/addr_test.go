package addr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzCanonical: the canonicaliser never panics, its output is a fixed
// point (canonical twice is canonical once) and parses as the entry does,
// and Endpoint reads the canonical host and port back as the entry's key.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"2001:db8:0:0:0:0:0:7", "2001:DB8::7", "::ffff:10.0.0.7", "HOST-A", "host-a.example.com.",
		"10.0.0.7:08080", "[2001:db8::7]:8080", "[fe80::1%eth0]:80", "fe80::1%eth0", "010.0.0.7", "[10.0.0.7]:80",
		"host:+1", "[::]:0", "a:b:c", "[", "]", "%", ":", "[::ffff:1.2.3.4]", "h:0065535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Canonical(s)
		if err != nil {
			return
		}
		again, err := Canonical(c)
		if err != nil || again != c {
			t.Fatalf("canonical(%q) = %q, canonical(%q) = %q, %v", s, c, c, again, err)
		}
		k, _ := ParseAddress(c)
		if k2, _ := ParseAddress(s); k2 != k {
			t.Fatalf("%q and its canonical form %q parse apart: %v, %v", s, c, k2, k)
		}
		port := int(k.Port)
		if port == 0 {
			port = 1
		}
		if e := Endpoint(k.Host.String(), port); e.Host != k.Host {
			t.Fatalf("%q: the host %v reads back as %v", s, k.Host, e.Host)
		}
	})
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"2001:db8:0:0:0:0:0:7":    "2001:db8::7",
		"2001:DB8::7":             "2001:db8::7",
		"[2001:db8::7]":           "2001:db8::7",
		"[2001:0DB8::7]:08080":    "[2001:db8::7]:8080",
		"::ffff:10.0.0.7":         "10.0.0.7",
		"[::ffff:10.0.0.7]:80":    "10.0.0.7:80",
		"HOST-A":                  "host-a",
		"Host-A.Example.com.":     "host-a.example.com",
		"host-a.example.com.:443": "host-a.example.com:443",
		"10.0.0.7:08080":          "10.0.0.7:8080",
		"fe80::1%eth0":            "fe80::1%eth0",
		"[FE80::1%Eth0]:80":       "[fe80::1%Eth0]:80", // zones are interface names: case kept
	} {
		got, err := Canonical(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
}
