package httpctx

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxTransportAllocs is the most allocations the Transport may add to a
// request over its base RoundTripper.
const maxTransportAllocs = 4

// The Transport's own allocations per request, counted over a base that
// answers without I/O (so nothing else allocates meanwhile): a request
// whose kind travels on it, one nobody classified, and one whose kind a
// rule decided (the Transport writes it).
func TestTransport_AllocationsPerRequest(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	for _, c := range []struct {
		name   string
		rules  graylb.Rules
		header map[string]string
		writes string // the gray header the instance gets
	}{
		{"kind carried", graylb.Rules{}, map[string]string{"gray": "true"}, "true"},
		{"undecided", graylb.Rules{}, nil, ""},
		{"rule decided", graylb.Rules{CanaryPercent: 100}, nil, "true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", 8080, map[string]string{"gray": "true"})))
			require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", 8081, nil)))
			lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithRules(c.rules))
			require.NoError(t, err)
			defer lb.Close()
			var sent *http.Request
			tr := NewTransport(lb, WithBase(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent = r
				return resp, nil
			})))
			req, _ := http.NewRequest(http.MethodGet, "http://svc/x", nil)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			do := func(rt http.RoundTripper) {
				r, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, r.Body)
			}
			do(tr)
			assert.Equal(t, c.writes, sent.Header.Get("gray"))
			assert.Equal(t, "svc", req.URL.Host, "the caller's request is not modified")
			assert.Len(t, req.Header, len(c.header))
			extra := testing.AllocsPerRun(200, func() { do(tr) }) - testing.AllocsPerRun(200, func() { do(base) })
			t.Logf("%s: %.0f allocations per request over the base", c.name, extra)
			assert.LessOrEqual(t, extra, float64(maxTransportAllocs))
		})
	}
}

// A response with a body adds no allocation: the body that ends the call
// with it lives in the request copy's allocation. With a try timeout, the
// body wrapper is that same one (the try's context is released with it);
// a body timeout adds its timer.
func TestTransport_AllocationsPerRequestWithABody(t *testing.T) {
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", 8080, nil)))
	lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{}))
	require.NoError(t, err)
	defer lb.Close()
	body := &rewindable{data: "ok"}
	resp := &http.Response{StatusCode: 200}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		body.off = 0
		resp.Body = body
		return resp, nil
	})
	req, _ := http.NewRequest(http.MethodGet, "http://svc/x", nil)
	do := func(rt http.RoundTripper) func() {
		return func() {
			r, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
	}
	plain := testing.AllocsPerRun(200, do(base))
	for _, c := range []struct {
		name string
		opts []TransportOption
		max  float64
	}{
		{"defaults", nil, 1},
		{"try timeout", []TransportOption{WithTryTimeout(time.Minute)}, 8},   // 9 with a wrapper of its own
		{"body timeout", []TransportOption{WithBodyTimeout(time.Minute)}, 3}, // its timer
	} {
		tr := NewTransport(lb, append(c.opts, WithBase(base))...)
		extra := testing.AllocsPerRun(200, do(tr)) - plain
		t.Logf("%s: %.0f allocations per request over the base", c.name, extra)
		assert.LessOrEqual(t, extra, c.max, c.name)
	}
}

// rewindable is a body read from off.
type rewindable struct {
	data string
	off  int
}

func (r *rewindable) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

func (r *rewindable) Close() error { return nil }

// isServiceName tells names from IP addresses as net.ParseIP does,
// without parsing a name.
func TestIsServiceName(t *testing.T) {
	for host, want := range map[string]bool{
		"svc": true, "svc-a.ns": true, "1e5": true, "a1.2.3.4": true, "0x7f.1": true,
		"1.2.3.4": false, "127.0.0.1": false, "::1": false, "[::1]": false, "svc:80": false,
		"1.2.3": true, "1..2": true, "...": true, // digits and dots that are no address: names (as before)
	} {
		assert.Equal(t, want, isServiceName(host), host)
	}
}

// The address cache answers Instance.Addr and stays bounded.
func TestAddrCache(t *testing.T) {
	var c addrCache
	for i := 0; i < 3*maxAddrs; i++ {
		in := graylb.NewInstance("svc", "10.0.0.1", 1000+i%(maxAddrs+7), nil)
		require.Equal(t, in.Addr(), c.of(in))
	}
	assert.LessOrEqual(t, len(*c.m.Load()), maxAddrs)
	in := graylb.NewInstance("svc", "::1", 8080, nil)
	assert.Equal(t, "[::1]:8080", c.of(in))
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.of(in) }))
}
