package httpctx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want failure
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, unsent},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, unsent},
		{"refused, wrapped", fmt.Errorf("proxy: %w", syscall.ECONNREFUSED), unsent},
		{"certificate", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, unsent},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, lost},
		{"broken pipe", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, lost},
		{"closed before the response", io.EOF, lost},
		{"closed mid-response", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), lost},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, otherFailure},
		{"other", errors.New("tls: handshake failure"), otherFailure},
		{"nil-free wrapper", fmt.Errorf("x: %w", errors.New("y")), otherFailure},
	} {
		assert.Equal(t, tc.want, classify(tc.err), tc.name)
	}
}

func TestNotRetried(t *testing.T) {
	req := func(method, body string, key string, getBody bool) *http.Request {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		q, err := http.NewRequest(method, "http://svc/", r)
		require.NoError(t, err)
		if !getBody {
			q.GetBody = nil
			if body != "" {
				q.Body = io.NopCloser(strings.NewReader(body))
			}
		}
		if key != "" {
			q.Header.Set(key, "k1")
		}
		return q
	}
	def := &Transport{maxRetries: 2}
	unsentAll := &Transport{maxRetries: 2, retryUnsent: true}
	off := &Transport{maxRetries: 0}
	for _, tc := range []struct {
		name  string
		t     *Transport
		req   *http.Request
		f     failure
		tries int
		want  string
	}{
		{"GET refused", def, req("GET", "", "", false), unsent, 1, ""},
		{"GET reset", def, req("GET", "", "", false), lost, 1, ""},
		{"HEAD, OPTIONS, TRACE", def, req("OPTIONS", "", "", false), lost, 2, ""},
		{"PUT replayable", def, req("PUT", "x", "", true), lost, 1, ""},
		{"DELETE", def, req("DELETE", "", "", false), unsent, 1, ""},
		{"PUT without GetBody", def, req("PUT", "x", "", false), unsent, 1, "its body cannot be sent again (no GetBody)"},
		{"POST refused", def, req("POST", "x", "", true), unsent, 1, "POST is not idempotent"},
		{"PATCH refused", def, req("PATCH", "x", "", true), unsent, 1, "PATCH is not idempotent"},
		{"POST refused, WithRetryUnsent", unsentAll, req("POST", "x", "", true), unsent, 1, ""},
		{"POST reset, WithRetryUnsent", unsentAll, req("POST", "x", "", true), lost, 1, "POST is not idempotent"},
		{"POST with Idempotency-Key", def, req("POST", "x", "Idempotency-Key", true), lost, 1, ""},
		{"POST with X-Idempotency-Key", def, req("POST", "x", "X-Idempotency-Key", true), unsent, 1, ""},
		{"POST with a key, no GetBody", def, req("POST", "x", "Idempotency-Key", false), unsent, 1, "its body cannot be sent again (no GetBody)"},
		{"third try failed", def, req("GET", "", "", false), unsent, 3, "3 tries, as many as WithMaxRetries(2) allows"},
		{"second try failed", def, req("GET", "", "", false), unsent, 2, ""},
		{"retries off", off, req("GET", "", "", false), unsent, 1, "retries are off"},
	} {
		assert.Equal(t, tc.want, tc.t.notRetried(tc.req, tc.f, tc.tries), tc.name)
	}
}

func TestConnectionError(t *testing.T) {
	cause := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	e := &ConnectionError{Method: "GET", Service: "svc", Kind: graylb.Gray, Addr: "10.0.0.3:80",
		Tried: []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}, Reason: "3 tries, as many as WithMaxRetries(2) allows", Err: cause}
	assert.Equal(t, "httpctx: GET svc (gray request): instance 10.0.0.3:80 could not be connected to (nothing was sent) after tries of 10.0.0.1:80, 10.0.0.2:80; not retried: 3 tries, as many as WithMaxRetries(2) allows: dial tcp: connect: connection refused", e.Error())
	var err error = e
	assert.ErrorIs(t, err, ErrConnectionFailed)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	var op *net.OpError
	assert.ErrorAs(t, err, &op)
	e.Sent, e.Tried = true, nil
	assert.Contains(t, e.Error(), "connection to instance 10.0.0.3:80 lost before a response (the request may have been acted on); not retried")
}

// A request whose context is done is not retried: the try's error comes
// back as it is, and the instance is not counted as failed.
func TestRetry_StopsWhenTheContextIsDone(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, p := range []int{1, 2, 3} {
		require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", p, nil)))
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		cancel()
		return nil, refused
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
	_, err = NewTransport(lb, WithBase(base)).RoundTrip(req)
	assert.Equal(t, 1, calls)
	assert.Same(t, refused, err)
}

// One machine listed under two spellings of its address (127.0.0.1 and
// ::ffff:127.0.0.1) is tried once: a retry skips every spelling of an
// address tried, as ejection compares them.
func TestRetry_OneMachineUnderTwoSpellingsIsTriedOnce(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, in := range []graylb.Instance{
		graylb.NewInstance("svc", "127.0.0.1", 1, nil),
		graylb.NewInstance("svc", "::ffff:127.0.0.1", 1, nil),
		graylb.NewInstance("svc", "127.0.0.1", 2, nil),
		graylb.NewInstance("svc", "::FFFF:127.0.0.1", 2, nil),
	} {
		require.NoError(t, reg.Register(in))
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	var hosts []string
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hosts = append(hosts, r.URL.Host)
		return nil, refused
	})
	tr := NewTransport(lb, WithBase(base), WithMaxRetries(5))
	for i := 0; i < 4; i++ {
		hosts = nil
		req, _ := http.NewRequest(http.MethodGet, "http://svc/", nil)
		_, err := tr.RoundTrip(req)
		var ce *ConnectionError
		require.ErrorAs(t, err, &ce)
		ports := map[string]int{}
		for _, h := range hosts {
			_, p, _ := net.SplitHostPort(h)
			ports[p]++
		}
		assert.Equal(t, map[string]int{"1": 1, "2": 1}, ports, "request %d tried %v", i, hosts)
		assert.Len(t, ce.Tried, 2, "request %d", i)
	}
}
