package httpctx

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"github.com/graylb/graylb/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	next int64
	mu   sync.Mutex
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "graylb test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, next: 2}
}

// issue makes a leaf certificate for the DNS names (no IP SANs), for
// servers or, with client set, for clients.
func (ca *testCA) issue(t testing.TB, client bool, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca.mu.Lock()
	serial := ca.next
	ca.next++
	ca.mu.Unlock()
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsBackend is an HTTPS test server that counts its connections and
// answers "name host proto [client CN]".
type tlsBackend struct {
	*httptest.Server
	conns  atomic.Int64
	hits   atomic.Int64
	closed chan struct{} // one value per closed connection
}

func newTLSBackend(t testing.TB, name string, cert tls.Certificate, h2 bool, cfg func(*tls.Config)) *tlsBackend {
	t.Helper()
	b := &tlsBackend{closed: make(chan struct{}, 64)}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		ans := name + " " + r.Host + " " + r.Proto
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			ans += " " + r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, ans)
	}))
	b.EnableHTTP2 = h2
	b.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests want
	b.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if cfg != nil {
		cfg(b.TLS)
	}
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			b.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			select {
			case b.closed <- struct{}{}:
			default:
			}
		}
	}
	b.StartTLS()
	t.Cleanup(b.Close)
	return b
}

// registerTLS registers b as an instance of service at its loopback
// address.
func registerTLS(t testing.TB, reg *graylb.Registry, service string, b *tlsBackend, md map[string]string) {
	t.Helper()
	register(t, reg, service, b.Server, md)
}

// newLB is a LoadBalancer over reg that takes instances in one global
// round-robin order, so tests can count turns.
func newLB(t testing.TB, reg *graylb.Registry) *graylb.LoadBalancer {
	t.Helper()
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithPolicy(policy.StrictRoundRobin()))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb
}

// send sends method to url through rt and returns the body.
func send(rt http.RoundTripper, method, url string) (string, *http.Response, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return "", nil, err
	}
	if method == http.MethodPost {
		req.Body = io.NopCloser(strings.NewReader("x"))
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp, err
}

func trusting(ca *testCA, cfg ...func(*tls.Config)) *http.Transport {
	c := &tls.Config{RootCAs: ca.pool}
	for _, f := range cfg {
		f(c)
	}
	return &http.Transport{TLSClientConfig: c}
}

func TestTLS_VerifiesServiceName(t *testing.T) {
	ca := newTestCA(t)
	b := newTLSBackend(t, "b1", ca.issue(t, false, "user-service"), false, nil)
	reg := graylb.NewRegistry()
	registerTLS(t, reg, "user-service", b, nil)
	lb := newLB(t, reg)

	// What the issue hit: a plain transport verifies the address it dials.
	_, _, err := send(trusting(ca), http.MethodGet, b.URL)
	var he x509.HostnameError
	require.ErrorAs(t, err, &he, "the certificate names only the service")

	base := trusting(ca)
	rt := NewTransport(lb, WithBase(base))
	got, resp, err := send(rt, http.MethodGet, "https://user-service/x")
	require.NoError(t, err)
	assert.Equal(t, "b1 user-service HTTP/1.1", got, "verified against the service, Host is the service")
	assert.Equal(t, "user-service", resp.TLS.PeerCertificates[0].DNSNames[0])
	assert.Empty(t, base.TLSClientConfig.ServerName, "the caller's config is not modified")
	assert.False(t, base.TLSClientConfig.InsecureSkipVerify)

	// The caller's Host wins; WithInstanceHost sends the instance.
	req, _ := http.NewRequest(http.MethodGet, "https://user-service/", nil)
	req.Host = "api.example"
	resp, err = (&http.Client{Transport: rt}).Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "b1 api.example HTTP/1.1", string(body))
	got, _, err = send(NewTransport(lb, WithBase(trusting(ca)), WithInstanceHost()), http.MethodGet, "https://user-service/")
	require.NoError(t, err)
	assert.Equal(t, "b1 "+b.Listener.Addr().String()+" HTTP/1.1", got)
}

func TestTLS_ServerNameMapping(t *testing.T) {
	ca := newTestCA(t)
	b := newTLSBackend(t, "b1", ca.issue(t, false, "user-service.prod.svc"), false, nil)
	reg := graylb.NewRegistry()
	registerTLS(t, reg, "user-service", b, nil)
	lb := newLB(t, reg)

	_, _, err := send(NewTransport(lb, WithBase(trusting(ca))), http.MethodGet, "https://user-service/")
	var he x509.HostnameError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "user-service", he.Host)

	mapped := func(s string) string {
		if s == "user-service" {
			return s + ".prod.svc"
		}
		return ""
	}
	got, _, err := send(NewTransport(lb, WithBase(trusting(ca)), WithServerName(mapped)), http.MethodGet, "https://user-service/")
	require.NoError(t, err)
	assert.Equal(t, "b1 user-service HTTP/1.1", got, "the mapping decides the verified name, not the Host")

	// A mapping to another name is verified against that name.
	other := func(string) string { return "billing" }
	_, _, err = send(NewTransport(lb, WithBase(trusting(ca)), WithServerName(other)), http.MethodGet, "https://user-service/")
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "billing", he.Host)
}

func TestTLS_WrongNameRefusedAndRetried(t *testing.T) {
	ca := newTestCA(t)
	good := newTLSBackend(t, "good", ca.issue(t, false, "user-service"), false, nil)
	bad := newTLSBackend(t, "bad", ca.issue(t, false, "other-service"), false, nil)
	reg := graylb.NewRegistry()
	registerTLS(t, reg, "user-service", bad, nil)
	lb := newLB(t, reg)
	rt := NewTransport(lb, WithBase(trusting(ca)))

	// Only the impostor: the handshake error reaches the caller with its
	// cause.
	_, _, err := send(rt, http.MethodGet, "https://user-service/")
	require.Error(t, err)
	var ue *url.Error
	require.ErrorAs(t, err, &ue)
	var ve *tls.CertificateVerificationError
	require.ErrorAs(t, err, &ve)
	var he x509.HostnameError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "user-service", he.Host)
	assert.Equal(t, []string{"other-service"}, he.Certificate.DNSNames)

	// A certificate from an authority the caller does not trust is
	// refused too.
	foreign := newTLSBackend(t, "foreign", newTestCA(t).issue(t, false, "user-service"), false, nil)
	registerTLS(t, reg, "foreign", foreign, nil)
	_, _, err = send(NewTransport(lb, WithBase(trusting(ca)), WithServerName(func(string) string { return "user-service" })), http.MethodGet, "https://foreign/")
	var ua x509.UnknownAuthorityError
	require.ErrorAs(t, err, &ua)
	assert.EqualValues(t, 0, foreign.hits.Load())

	// With a good instance beside it: idempotent requests are retried on
	// the good one (nothing was sent to the impostor); a POST is not.
	registerTLS(t, reg, "user-service", good, nil)
	for i := 0; i < 6; i++ {
		got, _, err := send(rt, http.MethodGet, "https://user-service/")
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(got, "good "), got)
	}
	assert.EqualValues(t, 0, bad.hits.Load(), "the impostor never got a request")
	failures := 0
	for i := 0; i < 6; i++ {
		if _, _, err := send(rt, http.MethodPost, "https://user-service/"); err != nil {
			require.ErrorAs(t, err, &he)
			failures++
		}
	}
	// Round robin sends about every other POST to the impostor; were POSTs
	// retried, none would fail.
	assert.Positive(t, failures, "a POST that met the impostor is not retried")
	assert.Less(t, failures, 6)

	// Retries off: the error comes back at once.
	noRetry := NewTransport(lb, WithBase(trusting(ca)), WithMaxRetries(0))
	failures = 0
	for i := 0; i < 4; i++ {
		if _, _, err := send(noRetry, http.MethodGet, "https://user-service/"); err != nil {
			failures++
		}
	}
	assert.Equal(t, 2, failures)
}

func TestTLS_MutualTLS(t *testing.T) {
	ca := newTestCA(t)
	b := newTLSBackend(t, "b1", ca.issue(t, false, "user-service"), false, func(c *tls.Config) {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = ca.pool
	})
	reg := graylb.NewRegistry()
	registerTLS(t, reg, "user-service", b, nil)
	lb := newLB(t, reg)

	client := ca.issue(t, true, "order-service")
	rt := NewTransport(lb, WithBase(trusting(ca, func(c *tls.Config) { c.Certificates = []tls.Certificate{client} })))
	got, _, err := send(rt, http.MethodGet, "https://user-service/")
	require.NoError(t, err)
	assert.Equal(t, "b1 user-service HTTP/1.1 order-service", got, "the caller's client certificate was presented")

	// Without a client certificate the server refuses; that is not a
	// verification failure of ours, so it is not retried as one.
	_, _, err = send(NewTransport(lb, WithBase(trusting(ca))), http.MethodGet, "https://user-service/")
	require.Error(t, err)
	assert.False(t, certificateRejected(err), "%v", err)

	// The caller's minimum version holds: a server capped at TLS 1.2 is
	// refused when the client asks for 1.3.
	old := newTLSBackend(t, "old", ca.issue(t, false, "legacy"), false, func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 })
	registerTLS(t, reg, "legacy", old, nil)
	_, _, err = send(NewTransport(lb, WithBase(trusting(ca, func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }))), http.MethodGet, "https://legacy/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "protocol version")
	got, _, err = send(NewTransport(lb, WithBase(trusting(ca))), http.MethodGet, "https://legacy/")
	require.NoError(t, err)
	assert.Equal(t, "old legacy HTTP/1.1", got)
}

func TestTLS_HTTP2AsPlainTransport(t *testing.T) {
	ca := newTestCA(t)
	b := newTLSBackend(t, "b1", ca.issue(t, false, "user-service"), true, nil)
	reg := graylb.NewRegistry()
	registerTLS(t, reg, "user-service", b, nil)
	lb := newLB(t, reg)

	// proto is what a transport negotiates with the server, called as
	// https://user-service/ through graylb, and directly through a
	// transport built the same way (ServerName set so it verifies).
	for _, tc := range []struct {
		name  string
		base  func(serverName string) *http.Transport
		major int
	}{
		{"ForceAttemptHTTP2", func(sn string) *http.Transport {
			tr := trusting(ca, func(c *tls.Config) { c.ServerName = sn })
			tr.ForceAttemptHTTP2 = true
			return tr
		}, 2},
		{"a TLSClientConfig without ForceAttemptHTTP2", func(sn string) *http.Transport {
			return trusting(ca, func(c *tls.Config) { c.ServerName = sn })
		}, 1},
		{"a clone of http.DefaultTransport", func(sn string) *http.Transport {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: ca.pool, ServerName: sn}
			return tr
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := tc.base("user-service")
			defer plain.CloseIdleConnections()
			_, presp, err := send(plain, http.MethodGet, b.URL)
			require.NoError(t, err)
			assert.Equal(t, tc.major, presp.ProtoMajor, "the plain transport")

			base := tc.base("")
			rt := NewTransport(lb, WithBase(base))
			defer rt.CloseIdleConnections()
			for i := 0; i < 3; i++ {
				got, resp, err := send(rt, http.MethodGet, "https://user-service/")
				require.NoError(t, err)
				assert.Equal(t, tc.major, resp.ProtoMajor, "graylb negotiates as the plain transport")
				if tc.major == 2 {
					assert.Equal(t, "b1 user-service HTTP/2.0", got, "the :authority is the service")
				}
			}
		})
	}

	// A transport with nothing set negotiates HTTP/2 by default; setting a
	// TLSClientConfig on it would turn that off, so the clone forces it.
	bare := &http.Transport{}
	c := cloneFor(bare, "user-service")
	assert.True(t, c.ForceAttemptHTTP2)
	assert.Nil(t, c.TLSNextProto)
	// One that turned HTTP/2 off (an empty TLSNextProto) stays off.
	off := &http.Transport{TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	c = cloneFor(off, "user-service")
	assert.False(t, c.ForceAttemptHTTP2)
	assert.NotNil(t, c.TLSNextProto)
	assert.Equal(t, "user-service", c.TLSClientConfig.ServerName)
	assert.Nil(t, bare.TLSClientConfig.Certificates, "base untouched but for its own HTTP/2 set-up")
	assert.Empty(t, bare.TLSClientConfig.ServerName)
}

func TestTLS_ConnectionsPerInstance(t *testing.T) {
	ca := newTestCA(t)
	cert := ca.issue(t, false, "user-service")
	b1 := newTLSBackend(t, "b1", cert, false, nil)
	b2 := newTLSBackend(t, "b2", cert, false, nil)
	reg := graylb.NewRegistry()
	registerTLS(t, reg, "user-service", b1, nil)
	registerTLS(t, reg, "user-service", b2, nil)
	lb := newLB(t, reg)
	rt := NewTransport(lb, WithBase(trusting(ca)))

	seen := map[string]int{}
	for i := 0; i < 10; i++ {
		got, _, err := send(rt, http.MethodGet, "https://user-service/")
		require.NoError(t, err)
		seen[strings.Fields(got)[0]]++
	}
	assert.Equal(t, map[string]int{"b1": 5, "b2": 5}, seen, "round robin over both instances")
	// Connections are reused per instance. net/http hands a connection back
	// to its idle pool on its own goroutine after the body's EOF, so a
	// request that follows at once may dial another one: fewer connections
	// than requests, not one per request.
	assert.Less(t, b1.conns.Load(), int64(5), "kept-alive connections are reused per instance")
	assert.Less(t, b2.conns.Load(), int64(5))
	assert.Len(t, rt.tls.m, 1, "one clone per server name")

	rt.CloseIdleConnections()
	for _, b := range []*tlsBackend{b1, b2} {
		select {
		case <-b.closed:
		case <-time.After(5 * time.Second):
			t.Fatal("CloseIdleConnections did not reach the clone's connections")
		}
	}
}

func TestTLS_ClonesBounded(t *testing.T) {
	ca := newTestCA(t)
	b := newTLSBackend(t, "b", ca.issue(t, false, "s1", "s2", "s3"), false, nil)
	reg := graylb.NewRegistry()
	for _, s := range []string{"s1", "s2", "s3"} {
		registerTLS(t, reg, s, b, nil)
	}
	lb := newLB(t, reg)
	rt := NewTransport(lb, WithBase(trusting(ca)))
	rt.tls.max = 2

	// A response from s1 in flight while s1's clone is dropped.
	resp, err := (&http.Client{Transport: rt}).Get("https://s1/")
	require.NoError(t, err)
	for _, s := range []string{"s2", "s3"} {
		_, _, err := send(rt, http.MethodGet, "https://"+s+"/")
		require.NoError(t, err)
	}
	assert.Len(t, rt.tls.m, 2)
	assert.NotContains(t, rt.tls.m, "s1", "the least recently used goes")
	// Closing the body returns s1's connection to a dropped clone, which
	// closes it rather than keep it forever.
	io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	select {
	case <-b.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the dropped clone kept its connection")
	}
	// s1 comes back with a clone of its own.
	got, _, err := send(rt, http.MethodGet, "https://s1/")
	require.NoError(t, err)
	assert.Equal(t, "b s1 HTTP/1.1", got)
	assert.Len(t, rt.tls.m, 2)
}

func TestTLS_PlainHTTPUnchanged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Host)
	}))
	defer srv.Close()
	reg := graylb.NewRegistry()
	register(t, reg, "svc", srv, nil)
	lb := newLB(t, reg)

	rt := NewTransport(lb, WithServerName(func(string) string { return "not used for http" }))
	got, _, err := send(rt, http.MethodGet, "http://svc/")
	require.NoError(t, err)
	assert.Equal(t, "svc", got, "Host is the service name")
	assert.Empty(t, rt.tls.m, "plain http uses the base transport itself")
	got, _, err = send(NewTransport(lb, WithInstanceHost()), http.MethodGet, "http://svc/")
	require.NoError(t, err)
	assert.Equal(t, srv.Listener.Addr().String(), got)

	// A request built by hand with no Host gets the service name too.
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "http", Host: "svc", Path: "/"}, Header: http.Header{}}
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "svc", string(b))
}

func TestTLS_HostileInput(t *testing.T) {
	ca := newTestCA(t)
	b := newTLSBackend(t, "b", ca.issue(t, false, "user-service"), false, nil)
	reg := graylb.NewRegistry()
	registerTLS(t, reg, "user-service", b, nil)
	registerTLS(t, reg, "odd!name", b, nil)
	lb := newLB(t, reg)

	// A service name that is no TLS host name is refused before any
	// connection, with the body closed.
	var dialed atomic.Bool
	base := trusting(ca)
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed.Store(true)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, "https://odd!name/", body)
	_, err := NewTransport(lb, WithBase(base)).RoundTrip(req)
	require.ErrorIs(t, err, ErrServerName)
	assert.True(t, body.closed)
	assert.False(t, dialed.Load())
	assert.Empty(t, NewTransport(lb, WithBase(base)).tls.m)

	// So is a mapping to a bad name; an empty mapping keeps the service's.
	for _, bad := range []string{"a b", "x:443", "-.", "a-.svc", ".svc", "a..b", strings.Repeat("a", 64) + ".svc", strings.Repeat("a.", 127) + "aa", "ünï"} {
		_, _, err := send(NewTransport(lb, WithBase(base), WithServerName(func(string) string { return bad })), http.MethodGet, "https://user-service/")
		require.ErrorIs(t, err, ErrServerName, "%q", bad)
	}
	got, _, err := send(NewTransport(lb, WithBase(base), WithServerName(func(string) string { return "" })), http.MethodGet, "https://user-service/")
	require.NoError(t, err)
	assert.Equal(t, "b user-service HTTP/1.1", got)
	for _, ok := range []string{"user-service", "user_service.prod.svc.", "127.0.0.1", "::1", strings.Repeat("a", 63)} {
		assert.True(t, validServerName(ok), ok)
	}
	assert.True(t, dialed.Load())

	// A base *http.Transport whose dialer fails: the error reaches the
	// caller, retried as a connection failure on each instance once.
	boom := errors.New("no route to instance")
	var dials atomic.Int64
	failing := trusting(ca)
	failing.DialContext = func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: boom}
	}
	_, _, err = send(NewTransport(lb, WithBase(failing)), http.MethodGet, "https://user-service/")
	require.ErrorIs(t, err, boom)
	assert.EqualValues(t, 1, dials.Load(), "one instance, nothing to retry on")

	// A base that is not an *http.Transport gets the instance address as
	// URL host and the service as Host; graylb cannot set its server name.
	var sent *http.Request
	rt := NewTransport(lb, WithBase(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return nil, errors.New("refused by the double")
	})))
	_, _, err = send(rt, http.MethodGet, "https://user-service/")
	require.ErrorContains(t, err, "refused by the double")
	assert.Equal(t, "https", sent.URL.Scheme)
	assert.Equal(t, b.Listener.Addr().String(), sent.URL.Host)
	assert.Equal(t, "user-service", sent.Host)
	assert.Nil(t, rt.tls)
	rt.CloseIdleConnections() // no CloseIdleConnections on the base: a no-op
	(*Transport)(nil).CloseIdleConnections()
}

// BenchmarkTransportOverheadTLS is BenchmarkTransportOverhead over https:
// graylb's per-server-name clone against a plain transport with the same
// TLS configuration, both on kept-alive connections.
func BenchmarkTransportOverheadTLS(b *testing.B) {
	ca := newTestCA(b)
	srv := newTLSBackend(b, "b", ca.issue(b, false, "svc"), false, nil)
	reg := graylb.NewRegistry()
	registerTLS(b, reg, "svc", srv, nil)
	lb := newLB(b, reg)
	plain := trusting(ca, func(c *tls.Config) { c.ServerName = "svc" })
	gray := NewTransport(lb, WithBase(trusting(ca)))
	defer plain.CloseIdleConnections()
	defer gray.CloseIdleConnections()

	do := func(rt http.RoundTripper, url string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("gray", "true")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	plainDo := func() { do(plain, srv.URL+"/") }
	grayDo := func() { do(gray, "https://svc/") }
	for i := 0; i < 50; i++ {
		plainDo()
		grayDo()
	}
	adaptertest.Interleave(b, plainDo, grayDo, "extra-allocs/req")
}
