package engine

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// headerKey carries fake request headers in tests.
type headerKey struct{}

func withHeaders(ctx context.Context, kv ...string) context.Context {
	h := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return context.WithValue(ctx, headerKey{}, h)
}

var testHandler = ContextHandlerFunc(func(ctx context.Context, name string) string {
	h, _ := ctx.Value(headerKey{}).(map[string]string)
	return h[name]
})

// inst makes a usable instance; md is key, value pairs.
func inst(service string, port int, md ...string) Instance {
	m := map[string]string{}
	for i := 0; i+1 < len(md); i += 2 {
		m[md[i]] = md[i+1]
	}
	return NewInstance(service, "127.0.0.1", port, m)
}

func newTestLB(t testing.TB, list []Instance, opts ...Option) (*LoadBalancer, *Registry) {
	t.Helper()
	reg := NewRegistry()
	for _, in := range list {
		require.NoError(t, reg.Register(in))
	}
	if len(list) == 0 {
		// make the service known, then empty
		require.NoError(t, reg.Register(inst("svc", 1)))
		require.NoError(t, reg.Deregister("svc", "127.0.0.1:1"))
	}
	opts = append([]Option{WithContextHandler(testHandler)}, opts...)
	lb, err := New(reg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb, reg
}

// pickedSet picks n times and returns the sorted set of addresses.
func pickedSet(t testing.TB, lb *LoadBalancer, ctx context.Context, service string, n int) ([]string, error) {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		in, err := lb.Pick(ctx, service)
		if err != nil {
			return nil, err
		}
		seen[in.Addr()] = true
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out, nil
}

func addrs(list []Instance) []string {
	out := make([]string, 0, len(list))
	for _, in := range list {
		out = append(out, in.Addr())
	}
	sort.Strings(out)
	return out
}

func mix(name string, md ...[]string) []Instance {
	out := make([]Instance, len(md))
	for i, m := range md {
		out[i] = inst(name, 9000+i, m...)
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
