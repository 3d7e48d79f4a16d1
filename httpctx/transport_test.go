package httpctx

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFullLink(t *testing.T) {
	reg := graylb.NewRegistry()
	bp1, bp2, bg := named("b-prod-1"), named("b-prod-2"), named("b-gray")
	defer bp1.Close()
	defer bp2.Close()
	defer bg.Close()
	register(t, reg, "svc-b", bp1, nil)
	register(t, reg, "svc-b", bp2, map[string]string{"gray": "false"})
	register(t, reg, "svc-b", bg, map[string]string{"gray": "true"})
	register(t, reg, "svc-a", hop(t, "a-prod", reg, "svc-b", false), nil)
	register(t, reg, "svc-a", hop(t, "a-gray", reg, "svc-b", true), map[string]string{"gray": "true"})
	edge := hop(t, "edge", reg, "svc-a", false)

	for _, tc := range []struct {
		name string
		hdr  []string
		want []string // acceptable answers
	}{
		{"no header", nil, []string{"edge>a-prod>b-prod-1", "edge>a-prod>b-prod-2"}},
		{"gray true", []string{"gray", "true"}, []string{"edge>a-gray>b-gray"}},
		{"gray TRUE", []string{"gray", "TRUE"}, []string{"edge>a-gray>b-gray"}},
		{"gray false", []string{"gray", "false"}, []string{"edge>a-prod>b-prod-1", "edge>a-prod>b-prod-2"}},
		{"gray junk", []string{"gray", "junk"}, []string{"edge>a-prod>b-prod-1", "edge>a-prod>b-prod-2"}},
		// (" true" cannot be tested here: HTTP strips a field value's
		// leading whitespace on the wire, so the server reads "true".)
		{"gray yes", []string{"gray", "yes"}, []string{"edge>a-prod>b-prod-1", "edge>a-prod>b-prod-2"}},
		{"gray 1", []string{"gray", "1"}, []string{"edge>a-prod>b-prod-1", "edge>a-prod>b-prod-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 6; i++ {
				got, code := fetch(t, edge.URL, tc.hdr...)
				require.Equal(t, http.StatusOK, code, got)
				assert.Contains(t, tc.want, got)
			}
		})
	}

	t.Run("gray falls back to prod for the hop without gray", func(t *testing.T) {
		require.NoError(t, reg.Deregister("svc-b", bg.Listener.Addr().String()))
		for i := 0; i < 4; i++ {
			got, _ := fetch(t, edge.URL, "gray", "true")
			assert.Contains(t, []string{"edge>a-gray>b-prod-1", "edge>a-gray>b-prod-2"}, got)
		}
		got, _ := fetch(t, edge.URL)
		assert.True(t, strings.HasPrefix(got, "edge>a-prod>b-prod"), got)
	})
}

func TestTransport_RetriesConnectionFailureOnSameKind(t *testing.T) {
	var hits atomic.Int64
	count := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			io.WriteString(w, name)
		}))
	}
	reg := graylb.NewRegistry()
	prod, gray := count("prod"), count("gray")
	defer prod.Close()
	defer gray.Close()
	register(t, reg, "svc", prod, nil)
	register(t, reg, "svc", gray, map[string]string{"gray": "true"})
	h, p := deadAddr(t)
	require.NoError(t, reg.Register(graylb.NewInstance("svc", h, p, nil)))
	h2, p2 := deadAddr(t)
	require.NoError(t, reg.Register(graylb.NewInstance("svc", h2, p2, map[string]string{"gray": "true"})))

	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}

	do := func(method, gray string, body io.Reader) (string, error) {
		req, _ := http.NewRequest(method, "http://svc/", body)
		if gray != "" {
			req.Header.Set("gray", gray)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	for i := 0; i < 10; i++ {
		got, err := do(http.MethodGet, "", nil)
		require.NoError(t, err, "GET is retried on the live prod instance")
		assert.Equal(t, "prod", got, "a prod request is never retried onto gray")
		got, err = do(http.MethodGet, "true", nil)
		require.NoError(t, err)
		assert.Equal(t, "gray", got, "a gray request is retried on gray, not prod")
		got, err = do(http.MethodPut, "", strings.NewReader("replayable"))
		require.NoError(t, err, "a replayable PUT is retried")
		assert.Equal(t, "prod", got)
	}
	// POST is not idempotent: over enough calls round robin lands on the
	// dead instance and the error comes back instead of a retry.
	failures := 0
	for i := 0; i < 10; i++ {
		if _, err := do(http.MethodPost, "", strings.NewReader("x")); err != nil {
			failures++
			var ue *url.Error
			assert.True(t, errors.As(err, &ue))
		}
	}
	// Round robin over 2 prod instances sends about every other POST to the
	// dead one; were POSTs retried, none would fail.
	assert.Positive(t, failures, "a POST that hit the dead instance is not retried")
	assert.Less(t, failures, 10)

	// The only gray instance left refuses connections: it serves nobody,
	// so a gray GET falls back to prod, as with no gray instance at all.
	require.NoError(t, reg.Deregister("svc", gray.Listener.Addr().String()))
	for i := 0; i < 10; i++ {
		got, err := do(http.MethodGet, "true", nil)
		require.NoError(t, err)
		assert.Equal(t, "prod", got)
	}
}

func TestTransport_BadInput(t *testing.T) {
	reg := graylb.NewRegistry()
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb)}

	_, err = client.Get("http://unknown-service/")
	require.ErrorIs(t, err, graylb.ErrUnknownService)
	var ue *url.Error
	require.True(t, errors.As(err, &ue))

	srv := named("x")
	defer srv.Close()
	in := register(t, reg, "empty", srv, nil)
	require.NoError(t, reg.Deregister("empty", in.Addr()))
	lb2, _ := graylb.New(reg, graylb.WithCacheOptions(graylb.WithEmptyProtection(false)))
	defer lb2.Close()
	_, err = (&http.Client{Transport: NewTransport(lb2)}).Get("http://empty/")
	require.ErrorIs(t, err, graylb.ErrNoInstance)
	assert.Contains(t, err.Error(), `"empty"`)

	// A host with a port or an IP is passed through unchanged.
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()

	// No host.
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/x"}, Header: http.Header{}}
	_, err = NewTransport(lb).RoundTrip(req)
	require.ErrorIs(t, err, ErrNoHost)
	_, err = NewTransport(nil).RoundTrip(httptest.NewRequest(http.MethodGet, "http://svc/", nil))
	require.Error(t, err)
	_, err = NewTransport(lb).RoundTrip(&http.Request{})
	require.Error(t, err)

	// Unknown service with passthrough goes to the base transport.
	var based atomic.Bool
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		based.Store(true)
		return nil, errors.New("base called")
	})
	_, err = (&http.Client{Transport: NewTransport(lb, WithPassthroughUnknown(), WithBase(base))}).Get("http://unknown-service/")
	require.Error(t, err)
	assert.True(t, based.Load())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTransport_DoesNotModifyRequestAndClosesBody(t *testing.T) {
	reg := graylb.NewRegistry()
	srv := named("x")
	defer srv.Close()
	register(t, reg, "svc", srv, nil)
	lb, _ := graylb.New(reg, graylb.WithContextHandler(Handler()))
	defer lb.Close()
	var sent *http.Request
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	ctx := admitted(http.Header{"Uid": {"u7"}, "Gray": {"true"}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/path?q=1", nil)
	_, err := NewTransport(lb, WithBase(base)).RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "svc", req.URL.Host, "caller's request untouched")
	assert.Empty(t, req.Header)
	assert.Equal(t, srv.Listener.Addr().String(), sent.URL.Host)
	assert.Equal(t, "svc", sent.Host, "the Host header is the service name")
	assert.Equal(t, "/path", sent.URL.Path)
	assert.Equal(t, "u7", sent.Header.Get("uid"), "propagated")
	assert.Equal(t, "true", sent.Header.Get("gray"), "routed kind written")

	// The body is closed when no instance can be picked.
	b := &closeRecorder{Reader: strings.NewReader("x")}
	req, _ = http.NewRequest(http.MethodPost, "http://nope/", b)
	_, err = NewTransport(lb, WithBase(base)).RoundTrip(req)
	require.Error(t, err)
	assert.True(t, b.closed)
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestTransport_BaseTransportErrors(t *testing.T) {
	reg := graylb.NewRegistry()
	srv := named("x")
	defer srv.Close()
	register(t, reg, "svc", srv, nil)
	srv2 := named("y")
	defer srv2.Close()
	register(t, reg, "svc", srv2, nil)
	lb, _ := graylb.New(reg, graylb.WithContextHandler(Handler()))
	defer lb.Close()
	var calls atomic.Int64
	boom := errors.New("tls: handshake failure")
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, boom
	})
	_, err := (&http.Client{Transport: NewTransport(lb, WithBase(base))}).Get("http://svc/")
	require.ErrorIs(t, err, boom, "the base transport's error comes back, wrapped")
	assert.EqualValues(t, 1, calls.Load(), "only connection failures are retried")

	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	calls.Store(0)
	base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, refused
	})
	_, err = (&http.Client{Transport: NewTransport(lb, WithBase(base), WithMaxRetries(5))}).Get("http://svc/")
	require.Error(t, err)
	assert.EqualValues(t, 2, calls.Load(), "retries are bounded by the candidates: each instance once")
}
