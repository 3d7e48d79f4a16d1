package httpctx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrServerName: the name a service's certificates are verified against
// is not a valid TLS host name (map it with WithServerName).
var ErrServerName = errors.New("httpctx: invalid TLS server name")

// maxTLSClones bounds the per-server-name clones of the base transport.
const maxTLSClones = 256

// WithServerName maps a service name to the name its instances'
// certificates carry, for https://<service>/... (for example
// "user-service" to "user-service.prod.svc"). An empty result keeps the
// service's own name, the default. The name only decides what the
// certificate is verified against (and the SNI sent); the Host header is
// unchanged. f must be safe for concurrent use.
func WithServerName(f func(service string) string) TransportOption {
	return func(t *Transport) { t.serverName = f }
}

// WithInstanceHost sends the picked instance's host:port as the Host
// header (and the HTTP/2 authority) instead of the service name. A Host
// the caller set to something other than the service name is still sent
// as it is.
func WithInstanceHost() TransportOption { return func(t *Transport) { t.instanceHost = true } }

// CloseIdleConnections closes the idle connections of the base transport
// (when it has the method) and of every per-server-name clone; it does
// not interrupt connections in use.
func (t *Transport) CloseIdleConnections() {
	if t == nil {
		return
	}
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	if t.tls != nil {
		t.tls.closeIdle()
	}
}

// serverNameOf returns the name service's certificates are verified
// against.
func (t *Transport) serverNameOf(service string) (string, error) {
	name := service
	if t.serverName != nil {
		if n := t.serverName(service); n != "" {
			name = n
		}
	}
	if !validServerName(name) {
		return "", fmt.Errorf("%w: %q for service %q", ErrServerName, name, service)
	}
	return name, nil
}

// validServerName: an IP address, or a host name of dot-separated labels
// of 1 to 63 letters, digits, '-' (not first or last) and '_' (found in
// private deployments), at most 253 bytes, with an optional final dot.
func validServerName(name string) bool {
	if net.ParseIP(name) != nil {
		return true
	}
	if n := len(name); n > 0 && name[n-1] == '.' {
		name = name[:n-1]
	}
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			switch c := label[i]; {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return true
}

// certificateRejected reports whether err is the client refusing the
// server's certificate during the handshake, before anything was sent.
func certificateRejected(err error) bool {
	var (
		ve *tls.CertificateVerificationError
		he x509.HostnameError
		ue x509.UnknownAuthorityError
		ie x509.CertificateInvalidError
	)
	return errors.As(err, &ve) || errors.As(err, &he) || errors.As(err, &ue) || errors.As(err, &ie)
}

// tlsClones holds a clone of the base transport per server name, at most
// max, the least recently used dropped first.
type tlsClones struct {
	base *http.Transport
	max  int
	mu   sync.Mutex
	tick uint64
	m    map[string]*tlsClone
}

type tlsClone struct {
	tr      *http.Transport
	used    uint64 // tick of the last get; under tlsClones.mu
	evicted atomic.Bool
}

func newTLSClones(base *http.Transport, max int) *tlsClones {
	return &tlsClones{base: base, max: max, m: make(map[string]*tlsClone)}
}

// get returns the clone for name, making it on first use.
func (c *tlsClones) get(name string) *tlsClone {
	c.mu.Lock()
	c.tick++
	if e, ok := c.m[name]; ok {
		e.used = c.tick
		c.mu.Unlock()
		return e
	}
	var old *tlsClone
	if len(c.m) >= c.max {
		var oldName string
		for n, e := range c.m {
			if old == nil || e.used < old.used {
				old, oldName = e, n
			}
		}
		delete(c.m, oldName)
		old.evicted.Store(true)
	}
	e := &tlsClone{tr: cloneFor(c.base, name), used: c.tick}
	c.m[name] = e
	c.mu.Unlock()
	if old != nil {
		old.tr.CloseIdleConnections()
	}
	return e
}

func (c *tlsClones) closeIdle() {
	c.mu.Lock()
	list := make([]*http.Transport, 0, len(c.m))
	for _, e := range c.m {
		list = append(list, e.tr)
	}
	c.mu.Unlock()
	for _, tr := range list {
		tr.CloseIdleConnections()
	}
}

// release makes sure a clone dropped while a response it sent was in
// flight closes the connection that response returns to its pool: called
// once the response's body ended.
func (e *tlsClone) release() {
	if e.evicted.Load() {
		e.tr.CloseIdleConnections()
	}
}

// cloneFor returns a copy of base that verifies certificates against
// name. It keeps base's TLS configuration, and negotiates HTTP/2 when base
// does: setting a TLSClientConfig on a transport that had none would
// otherwise turn HTTP/2 off.
func cloneFor(base *http.Transport, name string) *http.Transport {
	tr := base.Clone() // runs base's one-time protocol set-up first
	if _, h2 := base.TLSNextProto["h2"]; h2 && tr.TLSNextProto == nil {
		tr.ForceAttemptHTTP2 = true
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.ServerName = name
	return tr
}
