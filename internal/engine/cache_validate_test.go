package engine

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A user's Supplier hands over instances nothing else checked: the Cache
// drops, with a log line, every one the Registry and the Nacos supplier
// would refuse (Instance.Validate), from its first list and from every
// later one, so that no prod or gray pick ever returns one.
func TestCache_DropsInvalidInstancesOfAnySupplier(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Instance
	}{
		{"port 0", NewInstance("svc", "127.0.0.1", 0, nil)},
		{"port -1", NewInstance("svc", "127.0.0.1", -1, nil)},
		{"port 65536", NewInstance("svc", "127.0.0.1", 65536, nil)},
		{"port 1<<32+80", NewInstance("svc", "127.0.0.1", 1<<32+80, nil)},
		{"empty host", NewInstance("svc", "", 80, nil)},
		{"markup host", NewInstance("svc", "<script>", 80, nil)},
		{"host with a space", NewInstance("svc", "a b", 80, nil)},
		{"host with a path", NewInstance("svc", "evil.example/x", 80, nil)},
		{"host with a query", NewInstance("svc", "h?x=1", 80, nil)},
		{"host with a fragment", NewInstance("svc", "h#x", 80, nil)},
		{"host with user info", NewInstance("svc", "user@h", 80, nil)},
		{"header injection", NewInstance("svc", "h\r\nX-Injected: 1", 80, nil)},
		{"bracketed host", NewInstance("svc", "[::1]", 80, nil)},
		{"host with a port", NewInstance("svc", "127.0.0.1:80", 80, nil)},
		{"zone with a slash", NewInstance("svc", "fe80::1%a/b", 80, nil)},
		// Hosts no rule can name (a gray rule naming the machine, 10.0.0.7,
		// would never match them).
		{"IPv4 with a leading zero", NewInstance("svc", "010.0.0.7", 80, nil)},
		{"IPv4 shorthand", NewInstance("svc", "10.7", 80, nil)},
		{"IPv4 as one number", NewInstance("svc", "167772167", 80, nil)},
		{"IPv4 out of range", NewInstance("svc", "10.0.0.300", 80, nil)},
		{"all-digit last label", NewInstance("svc", "host.123", 80, nil)},
	} {
		for _, kind := range []string{"false", "true"} {
			t.Run(tc.name+"/gray="+kind, func(t *testing.T) {
				bad := tc.in
				bad.Metadata = map[string]string{"gray": kind}
				prod := NewInstance("svc", "127.0.0.1", 1, nil)
				gray := NewInstance("svc", "127.0.0.1", 2, map[string]string{"gray": "true"})
				src := &fakeSource{list: []Instance{bad, prod, gray}}
				var logs syncBuffer
				lb, err := New(src, WithContextHandler(testHandler), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
				require.NoError(t, err)
				defer lb.Close()
				check := func(when string, valid ...int) {
					t.Helper()
					for _, ctx := range []context.Context{context.Background(), withHeaders(context.Background(), "gray", "true")} {
						for i := 0; i < 20; i++ {
							in, err := lb.Pick(ctx, "svc")
							require.NoError(t, err, when)
							require.Contains(t, valid, in.Port, "%s: picked %q port %d", when, in.Host, in.Port)
						}
					}
				}
				check("first list", 1, 2)
				src.push([]Instance{prod, bad, gray, NewInstance("svc", "127.0.0.1", 3, nil)})
				check("pushed list", 1, 2, 3)
				assert.Contains(t, logs.String(), "dropped an invalid instance", "a log line says what was dropped")
			})
		}
	}
}

// The gray promise for an address no rule can name: an instance at
// 010.0.0.7 (leading zero) with the rule naming the machine as it must be
// written, 10.0.0.7. The rule is accepted; no prod pick may reach the
// instance the operator marked gray (it went to 10 of 20 when the Cache
// kept it: 010.0.0.7 and 10.0.0.7 compared unequal).
func TestGrayAddresses_NoProdPickReachesAHostNoRuleCanName(t *testing.T) {
	for _, host := range []string{"010.0.0.7", "10.7", "167772167"} {
		t.Run(host, func(t *testing.T) {
			marked := NewInstance("svc", host, 8080, nil)
			prod := NewInstance("svc", "10.0.0.1", 8080, nil)
			src := &fakeSource{list: []Instance{marked, prod}}
			lb, err := New(src, WithContextHandler(testHandler), WithLogger(slog.New(slog.NewTextHandler(&syncBuffer{}, nil))))
			require.NoError(t, err)
			defer lb.Close()
			require.NoError(t, lb.SetRules(Rules{GrayAddresses: []string{"10.0.0.7"}}))
			reached := 0
			for i := 0; i < 20; i++ {
				in, err := lb.Pick(context.Background(), "svc")
				require.NoError(t, err)
				if in.Host == host {
					reached++
				}
			}
			assert.Zero(t, reached, "of 20 prod picks reached %s, marked gray by the rule 10.0.0.7", host)
		})
	}
}
