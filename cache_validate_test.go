package graylb

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
