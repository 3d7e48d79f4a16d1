package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numericSpellings are hosts the C library reads as an IPv4 address that
// net/netip does not read (or reads otherwise), each with the address the
// C library reads.
var numericSpellings = []struct{ host, libc string }{
	{"0x7f.0.0.0x1", "127.0.0.1"},
	{"0x7f000001", "127.0.0.1"},
	{"0X7F000001", "127.0.0.1"},
	{"0x7F.0X0.0x00.0x1", "127.0.0.1"},
	{"2130706433", "127.0.0.1"},
	{"017700000001", "127.0.0.1"},
	{"0177.0.0.1", "127.0.0.1"},
	{"0177.0.0.01", "127.0.0.1"},
	{"127.1", "127.0.0.1"},
	{"127.0.1", "127.0.0.1"},
	{"0x7f.1", "127.0.0.1"},
	{"127.0x1", "127.0.0.1"},
	{"1.2.3.0x4", "1.2.3.4"},
	{"10.0.0.07", "10.0.0.7"},
	{"010.0.0.7", "8.0.0.7"},
	{"10.7", "10.0.0.7"},
	{"167772167", "10.0.0.7"},
	{"0x0a", "0.0.0.10"},
	{"0", "0.0.0.0"},
	{"0xffffffff", "255.255.255.255"},
	{"037777777777", "255.255.255.255"},
	{"1.16777215", "1.255.255.255"},
	{"1.2.65535", "1.2.255.255"},
	// With a trailing dot: one name with its dot and without.
	{"0x7f000001.", "127.0.0.1"},
	{"127.1.", "127.0.0.1"},
	{"127.0.0.1.", "127.0.0.1"},
}

// Issue item 5: every numeric IPv4 spelling the C library reads is refused
// on both sides, rules and instances, with the address it names in the
// error (0x7f.0.0.0x1 and 0x7f000001 were accepted as host names: prod
// picks reached an instance so registered while a rule named its machine,
// and the C resolver dials 127.0.0.1 for them).
func TestNumericIPv4Spellings_RefusedWithTheAddressTheyName(t *testing.T) {
	for _, tc := range numericSpellings {
		err := NewInstance("svc", tc.host, 8080, nil).Validate()
		if assert.ErrorIs(t, err, ErrInvalidInstance, "instance host %q accepted", tc.host) {
			assert.Contains(t, err.Error(), "write "+tc.libc, "instance host %q", tc.host)
		}
		_, err = ParseRules([]byte(fmt.Sprintf(`{"grayAddresses":[%q]}`, tc.host)))
		if assert.ErrorIs(t, err, ErrInvalidRules, "rule %q accepted", tc.host) {
			assert.Contains(t, err.Error(), "write "+tc.libc, "rule %q", tc.host)
		}
		_, err = ParseRules([]byte(fmt.Sprintf(`{"grayAddresses":["%s:8080"]}`, tc.host)))
		if assert.ErrorIs(t, err, ErrInvalidRules, "rule %q accepted", tc.host+":8080") {
			assert.Contains(t, err.Error(), "write "+tc.libc+":8080", "rule %q", tc.host+":8080")
		}
	}
}

// The run: an instance at 0x7f000001 port P is prod although
// grayAddresses names 127.0.0.1:P, so prod picks reached the port the rule
// marks gray. It is dropped from the supplier's list now (with a log
// line), and the registry refuses it: no prod pick reaches port P.
func TestNumericHost_ProdNeverReachesTheGrayAddress(t *testing.T) {
	for _, host := range []string{"0x7f000001", "0x7f.0.0.0x1", "2130706433", "127.1"} {
		t.Run(host, func(t *testing.T) {
			src := &fakeSource{list: []Instance{NewInstance("svc", host, 7001, nil), NewInstance("svc", "127.0.0.1", 7002, nil)}}
			lb, err := New(src, WithContextHandler(testHandler), WithRules(Rules{GrayAddresses: []string{"127.0.0.1:7001"}}))
			require.NoError(t, err)
			t.Cleanup(func() { lb.Close() })
			reached := 0
			for i := 0; i < 100; i++ {
				in, err := lb.Pick(context.Background(), "svc")
				require.NoError(t, err)
				if in.Port == 7001 {
					reached++
				}
			}
			assert.Zero(t, reached, "prod picks of 100 that reached the gray address's port, through %s", host)
			err = NewRegistry().Register(NewInstance("svc", host, 7001, nil))
			if assert.ErrorIs(t, err, ErrInvalidInstance, "the registry took %s", host) {
				assert.Contains(t, err.Error(), "127.0.0.1", "the error names the address %s is", host)
			}
		})
	}
}

// A trailing dot is one name with and without it, on both sides: an
// instance at localhost. is valid, a localhost rule marks it gray, a
// localhost. rule marks an instance at localhost, and the two spellings are
// one machine to SameAddr and the ejection (docs/rules.md said so; the
// instance host localhost. was refused).
func TestTrailingDot_OneNameOnBothSides(t *testing.T) {
	for _, host := range []string{"localhost.", "Host-A.Example.COM.", "x."} {
		assert.NoError(t, NewInstance("svc", host, 80, nil).Validate(), "host %q", host)
	}
	for _, host := range []string{".", "..", "localhost..", ".localhost", "a..b."} {
		assert.ErrorIs(t, NewInstance("svc", host, 80, nil).Validate(), ErrInvalidInstance, "host %q", host)
	}
	for _, tc := range []struct{ host, entry string }{
		{"localhost.", "localhost"},
		{"localhost", "localhost."},
		{"localhost.", "localhost."},
		{"localhost.", "LOCALHOST:8080"},
		{"Host-A.Example.COM.", "host-a.example.com"},
	} {
		t.Run(tc.host+"~"+tc.entry, func(t *testing.T) {
			marked := NewInstance("svc", tc.host, 8080, nil)
			other := NewInstance("svc", "192.0.2.99", 9999, nil)
			lb, _ := newTestLB(t, []Instance{marked, other}, WithRules(Rules{GrayAddresses: []string{tc.entry}}))
			for i := 0; i < 20; i++ {
				in, err := lb.Pick(context.Background(), "svc")
				require.NoError(t, err)
				require.NotEqual(t, tc.host, in.Host, "a prod pick reached the instance the rule %q marks gray", tc.entry)
			}
			in, err := lb.Pick(WithValue(context.Background(), "gray", "true"), "svc")
			require.NoError(t, err)
			assert.Equal(t, tc.host, in.Host, "a gray request reaches the gray address")
		})
	}
	a, b := NewInstance("svc", "localhost.", 80, nil), NewInstance("svc", "localhost", 80, nil)
	assert.True(t, a.SameAddr(b))
	assert.True(t, b.SameAddr(a))
	assert.Equal(t, keyOf(a), keyOf(b))
}

// An instance listed at localhost. and at localhost is one machine to the
// ejection: failures under one spelling eject both.
func TestTrailingDot_EjectionUnderEitherSpelling(t *testing.T) {
	list := []Instance{NewInstance("svc", "localhost", 1, nil), NewInstance("svc", "localhost.", 2, nil),
		NewInstance("svc", "localhost", 2, nil), NewInstance("svc", "localhost", 3, nil)}
	lb, _, _, events := ejectionLB(t, list, OutlierConfig{BaseEjectionTime: 10 * time.Second})
	ctx := context.Background()
	failN(t, lb, ctx, "localhost.:2", 5)
	waitRebuild(t, events)
	for i := 0; i < 40; i++ {
		in, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		require.NotEqual(t, 2, in.Port, "the ejected machine reached as %s", in.Addr())
	}
}
