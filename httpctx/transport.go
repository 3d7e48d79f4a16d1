package httpctx

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/shadow"
)

// ErrNoHost: the request URL has no host to resolve.
var ErrNoHost = errors.New("httpctx: request URL has no host")

// Transport is an http.RoundTripper that resolves http://<service>/... and
// https://<service>/... through a graylb.LoadBalancer and sends the
// request to the picked instance.
//
// Contract, as net/http's RoundTripper:
//   - it is safe for concurrent use;
//   - it does not modify the caller's request: it sends a copy whose URL
//     host is the picked instance's host:port. The copy is shallow, as
//     Request.WithContext makes one: it shares the body and, until the
//     Transport writes a header, the header map with the caller's request,
//     which the base RoundTripper, by the same contract, does not modify;
//   - it returns an error only when no response was obtained, and then
//     the request body is closed;
//   - on the copy it sets the propagated headers kept by Middleware that
//     the caller did not set; the gray header to the kind it routed
//     ("true" or "false") when rules (a gray user, a match, the canary), a
//     context value or the caller's own flag decided it, and the version
//     header to the lane a match rule gave the request (when it carries no
//     version), so later hops route the same way. A request nobody
//     classified gets no gray header: later hops' rules still apply to it.
//
// The Host header an instance receives is the service name, as the
// request names it (http://user-service/... sends "Host: user-service"),
// the way a proxy or gRPC sends the service as the authority. A Host the
// caller set to something else (req.Host) is sent as it is.
// WithInstanceHost sends the picked instance's host:port instead.
//
// HTTPS: https://<service>/... connects to the picked instance and
// verifies its certificate against the service's name, or the name
// WithServerName maps the service to; it never skips verification. When
// the base transport is an *http.Transport (the default is), the
// Transport clones it once per server name, on first use, with
// TLSClientConfig.ServerName set to that name; everything else of the
// base's TLS configuration (roots, client certificates for mutual TLS,
// minimum version, cipher suites) is kept, and HTTP/2 is negotiated
// exactly when the base would negotiate it. The clone pools connections
// per instance address, as any http.Transport pools per host:port, so a
// connection is only reused for the instance and the server name it was
// verified for. At most 256 clones are kept; beyond that the least
// recently used one is dropped and its idle connections closed.
// CloseIdleConnections reaches the base and every clone. A DialTLSContext
// (or DialTLS) on the base does its own handshake: it is called with the
// instance's address, and the server name cannot reach it.
//
// A base that is not an *http.Transport (a wrapper, a test double)
// receives https requests whose URL host is the instance's host:port and
// whose Host is the service name: what it verifies is its own affair,
// usually the instance address, which a certificate naming only the
// service does not match. Wrap the graylb Transport instead
// (wrapper(httpctx.NewTransport(lb))) to keep the service's name
// verified.
//
// A host with a port, or that is an IP address, is not a service name: the
// request goes to the base transport unchanged. A service name the
// supplier does not know is refused with an error wrapping
// graylb.ErrUnknownService, unless WithPassthroughUnknown is set. A server
// name that is not a valid TLS host name is refused with an error wrapping
// ErrServerName. graylb errors come back wrapped, so errors.Is works
// through *url.Error.
//
// Each try's result is reported for the instance that served it (see
// adapter.Route.Call) when the caller is done with it: its body read to
// the end, a read of it failed, or the body closed (at once for a
// response without a body and a protocol switch). A connection failure, a
// failure status (WithFailureStatus; by default adapter.HTTPResult's: a
// 5xx but 501 and 504), a body that breaks off (reset, cut by
// WithBodyTimeout) or the request's deadline passing before the body's
// end counts against it; any other answer, closed early or not, for it.
// Its latency runs to the body's end (to the last byte read, for a body
// closed early; the time waited, for a deadline). A 504 (a timeout of the
// instance's own) counts for it but is told to the CallObserver as
// failed; a 499 is told to neither, as a cancelled request. A body never
// read to its end nor closed keeps its call in flight, as it keeps its
// connection. With graylb.WithOutlierDetection this ejects an instance
// that keeps failing, one that hangs or stalls included.
//
// Retries. A try that gets no response because its connection failed is
// reported against its instance (see above) and, when the policy below
// allows, the request is sent again to an instance not tried yet, picked
// as if the instances tried were not usable (adapter.Balancer.Reroute):
// a gray request goes to another gray instance while one is left, then
// falls back to prod, since a gray instance that cannot be connected to
// serves nobody (the gray rule's fall-back); a prod request only ever goes
// to prod. A retried request keeps its kind (a gray request served by prod
// still tells the next hop it is gray). The policy is net/http's own and
// that of Envoy's retry on connect-failure and reset:
//   - a connection that was never made (refused, timed out while
//     connecting, a certificate that failed verification): nothing was
//     sent; an idempotent request is retried, and with WithRetryUnsent any
//     request;
//   - a connection that broke before the response (reset, closed): the
//     instance may have acted on the request; only an idempotent one is
//     retried;
//   - idempotent: GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or a request with
//     an Idempotency-Key or X-Idempotency-Key header; its body must be
//     replayable (none, or GetBody set, as http.NewRequest sets it for
//     in-memory bodies);
//   - at most WithMaxRetries retries (default 2: three instances), each on
//     an instance not tried yet, within the request's context: once it is
//     done, the context's error comes back;
//   - anything else (a timeout waiting for the response, an error status,
//     a protocol error, an error the server reports after the handshake,
//     such as a refused client certificate) is not retried.
//
// A connection failure that is not retried fails at once with a
// *ConnectionError, which wraps ErrConnectionFailed and the transport's
// error: it names the instance (and those tried before it), says whether
// the request may have been sent, and why it was not retried ("POST is not
// idempotent", "its body cannot be sent again", "3 tries, as many as
// WithMaxRetries(2) allows", "no other instance can serve a prod
// request"). errors.As still reaches the cause: a
// *tls.CertificateVerificationError and the x509 error inside it, a
// *net.OpError. A request answered at its first try does no retry work.
//
// Retries remember nothing between requests: while the registry still
// lists an instance that refuses connections, each request picked onto it
// pays one failed connect before its retry. With
// graylb.WithOutlierDetection the instance is ejected after its
// consecutive failures (5 by default) and later requests skip it.
type Transport struct {
	lb           *adapter.Balancer
	base         http.RoundTripper
	maxRetries   int
	tryTimeout   time.Duration // 0: none (WithTryTimeout)
	bodyTimeout  time.Duration // 0: none (WithBodyTimeout)
	retryUnsent  bool
	passthrough  bool
	instanceHost bool
	serverName   func(service string) string
	tls          *tlsClones            // nil when base is not an *http.Transport
	addrs        addrCache             // instances' host:port strings
	failure      func(status int) bool // nil: adapter.HTTPResult (WithFailureStatus)
	canon        map[string]string     // the canonical header form of the LoadBalancer's key names, by lower-case name
	mirror       *shadow.Mirror        // mirrors prod requests when the rules say so (shadow.go)
}

// WithFailureStatus sets which response status codes count as a failure
// of the instance that answered, for outlier detection and latency-aware
// policies (graylb.WithOutlierDetection, policy.P2C). The default is
// adapter.HTTPResult, the reading every adapter shares: every 5xx but 501
// (the caller asked for what the instance does not serve) and 504 (a
// timeout of the instance's own: it answered) counts against the
// instance.
//
// failed decides whether an answer counts against the instance, and only
// that: a status it reports is a failure (adapter.Failed: told to the
// CallObserver as failed too); for a status it does not, the answer is
// read as adapter.HTTPResult reads it, a status that reading counts as
// failed being read as OK. So with failed(504) false a 504 is still told
// to the CallObserver as failed (adapter.DeadlineAnswered), and with
// failed(499) false a 499 is still not told (adapter.Cancelled). A
// connection failure always counts; a request the caller cancelled counts
// neither way. nil keeps the default.
func WithFailureStatus(failed func(status int) bool) TransportOption {
	return func(t *Transport) {
		if failed != nil {
			t.failure = failed
		}
	}
}

// resultOf is the result of a try its instance answered with status (see
// WithFailureStatus).
func (t *Transport) resultOf(status int) adapter.Result {
	r := adapter.HTTPResult(status)
	switch {
	case t.failure == nil:
		return r
	case t.failure(status):
		return adapter.Failed
	case r == adapter.Failed:
		return adapter.OK
	}
	return r
}

// TransportOption configures a Transport.
type TransportOption func(*Transport)

// WithBase sets the transport requests are sent with (default
// http.DefaultTransport).
func WithBase(rt http.RoundTripper) TransportOption {
	return func(t *Transport) {
		if rt != nil {
			t.base = rt
		}
	}
}

// WithMaxRetries bounds the retries of a request after connection failures
// (default 2, so a request tries at most three instances; 0 turns retries
// off; a negative n keeps the default). See Transport for what is retried.
func WithMaxRetries(n int) TransportOption {
	return func(t *Transport) {
		if n >= 0 {
			t.maxRetries = n
		}
	}
}

// WithPassthroughUnknown sends a request whose host is not a known service
// to the base transport unchanged, instead of failing.
func WithPassthroughUnknown() TransportOption { return func(t *Transport) { t.passthrough = true } }

// NewTransport returns a Transport over lb. It routes by the headers of
// the request it sends, then those Middleware kept from the request being
// served, whether or not lb has a ContextHandler (see Handler).
func NewTransport(lb *graylb.LoadBalancer, opts ...TransportOption) *Transport {
	t := &Transport{lb: adapter.For(lb), base: http.DefaultTransport, maxRetries: 2, canon: map[string]string{}, mirror: shadow.NewMirror(lb)}
	for _, n := range lb.Keys().Names() {
		t.canon[strings.ToLower(n)] = textproto.CanonicalMIMEHeaderKey(n)
	}
	for _, o := range opts {
		if o != nil {
			o(t)
		}
	}
	if ht, ok := t.base.(*http.Transport); ok {
		t.tls = newTLSClones(ht, maxTLSClones)
	}
	return t
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.roundTrip(req, true)
}

// roundTrip is RoundTrip; mirror says whether the request may be mirrored
// (not a copy a mirror sends itself).
func (t *Transport) roundTrip(req *http.Request, mirror bool) (*http.Response, error) {
	if req == nil || req.URL == nil {
		closeBody(req)
		return nil, fmt.Errorf("httpctx: nil request or URL")
	}
	if t == nil || t.lb == nil {
		closeBody(req)
		return nil, errors.New("httpctx: Transport has no LoadBalancer")
	}
	host := req.URL.Host
	if host == "" {
		closeBody(req)
		return nil, fmt.Errorf("%w: %q", ErrNoHost, req.URL.String())
	}
	// A copy's write is refused before anything else: whatever it is sent
	// to, a service without a gray instance or a host that is no service.
	if !shadow.Safe(req.Method) && shadow.Refuses(req.Context()) {
		closeBody(req)
		return nil, t.refuseWrite(req, host)
	}
	if !isServiceName(host) {
		return t.base.RoundTrip(req)
	}
	// For an untrusted caller (a trust boundary upstream marked the
	// context) the side is settled here: no routing key in the outgoing
	// headers (a proxy copies the caller's) routes, and Stamp deletes them
	// and writes the kind whatever decided it.
	routed := req.Header
	folded := !canonicalKeys(routed) // a key stored in another form (h["gray"]) routes as it travels
	if folded {
		routed = canonicalized(routed)
	}
	if adapter.UntrustedCaller(req.Context()) {
		h := headerOut{t: t, h: routed, folded: folded}
		t.lb.Untrusted(&h)
		routed = h.h
	}
	// The Transport reads the request's own headers (and those Middleware
	// kept) itself, whether or not lb has a ContextHandler: as the call's
	// reader, ahead of the ContextHandlers (no context is made for them).
	ctx := req.Context()
	route, err := t.lb.Route(ctx, host, headerReader{routed})
	if err != nil {
		if t.passthrough && errors.Is(err, graylb.ErrUnknownService) {
			return t.base.RoundTrip(req)
		}
		closeBody(req)
		return nil, fmt.Errorf("httpctx: %s %s: %w", req.Method, host, err)
	}
	rt := t.base
	var clone *tlsClone
	if req.URL.Scheme == "https" && t.tls != nil {
		name, err := t.serverNameOf(host)
		if err != nil {
			closeBody(req)
			return nil, fmt.Errorf("httpctx: %s %s: %w", req.Method, host, err)
		}
		clone = t.tls.get(name)
		rt = clone.tr
	}

	var tk *shadow.Ticket
	var start time.Time
	if mirror && route.Kind == graylb.Prod && shadow.Mirrored(req.Method) && replayable(req) && t.mirror.Drawn() && !shadow.Is(ctx) {
		if tk = t.mirror.Begin(host, shadow.HTTPRoute(req.Method, req.URL.Path)); tk != nil {
			start = time.Now()
		}
	}
	call := route.Start()
	c := t.outgoing(req, host, t.addrs.of(call.Instance), route, folded)
	resp, cancel, err := t.send(rt, &c.r)
	if err == nil {
		resp = t.answered(c, resp, call, clone, cancel)
		if resp.StatusCode == http.StatusTooManyRequests {
			resp, err = t.resendOverloaded(req, ctx, headerReader{routed}, rt, clone, host, route, call, resp)
		}
	} else {
		resp, err = t.retry(req, ctx, headerReader{routed}, rt, clone, host, route, call, err)
	}
	if tk != nil {
		resp = t.mirrored(req, tk, start, resp, err)
	}
	return resp, err
}

// isServiceName: no port, not an IP address. (An IPv4 address is digits
// and dots, an IPv6 one has colons: a name with any other byte is no IP
// address, which it says without parsing, whose error allocates.)
func isServiceName(host string) bool {
	if strings.Contains(host, ":") || strings.HasPrefix(host, "[") {
		return false
	}
	if strings.Trim(host, "0123456789.") != "" {
		return true
	}
	return net.ParseIP(host) == nil
}

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}

var _ http.RoundTripper = (*Transport)(nil)
