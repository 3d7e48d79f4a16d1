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
// request to the picked instance. As net/http's RoundTripper, it is safe
// for concurrent use, does not modify the caller's request (it sends a
// shallow copy, sharing the body and, until it writes a header, the header
// map), and returns an error only when no response was obtained, the
// request body then closed. On the copy it writes the request's routing
// state for the next hop (adapter.Balancer.Stamp) and sends the service
// name as Host, unless the caller set req.Host (WithInstanceHost: the
// instance's host:port).
//
// https:// verifies each instance's certificate against the service's name
// (or the name WithServerName maps it to), never skipping verification,
// when the base is an *http.Transport (docs/https.md). A host with a port,
// or an IP address, goes to the base unchanged; a service the Supplier
// does not know is refused (graylb.ErrUnknownService) unless
// WithPassthroughUnknown. graylb's errors come back wrapped, so errors.Is
// works through *url.Error.
//
// Each try's result is reported for the instance that served it when the
// caller is done with the response's body: read to its end, failed, or
// closed (docs/traffic.md says what counts against an instance). A try
// whose connection failed is sent again, at most WithMaxRetries times, to
// an instance of the request's kind not tried yet (a gray request falls
// back to prod once no gray one is left) when the request is idempotent
// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, an Idempotency-Key header) and
// its body replayable, or, with WithRetryUnsent, when nothing was sent;
// otherwise it fails with a *ConnectionError that says why (docs/http.md).
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
