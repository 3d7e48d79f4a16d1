package httpctx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// ErrConnectionFailed: a request got no response because its connection
// to an instance failed (refused, timed out while connecting, reset or
// closed before the response) and the Transport did not send it again.
// The error is a *ConnectionError: it names the instance and says why the
// request was not retried.
var ErrConnectionFailed = errors.New("httpctx: connection to the instance failed")

// ConnectionError is the error of a request whose connection to an
// instance failed and that was not retried (any more). It wraps
// ErrConnectionFailed and the transport's error (errors.Is and errors.As
// reach both: a *net.OpError, syscall.ECONNREFUSED, a
// *tls.CertificateVerificationError).
type ConnectionError struct {
	Method  string
	Service string
	Kind    graylb.Kind // the request's kind
	Addr    string      // the instance whose connection failed (the last one tried)
	Tried   []string    // every instance tried, in order; the last is Addr
	// Sent: the connection broke after the request was written, so the
	// instance may have acted on it; false when no connection was made
	// (nothing was sent).
	Sent   bool
	Reason string // why it was not retried
	Err    error  // the transport's error for Addr
}

func (e *ConnectionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "httpctx: %s %s (%s request): ", e.Method, e.Service, e.Kind)
	if errors.Is(e.Err, ErrTryTimeout) {
		fmt.Fprintf(&b, "instance %s sent no response within the try timeout (the request may have been acted on)", e.Addr)
	} else if e.Sent {
		fmt.Fprintf(&b, "connection to instance %s lost before a response (the request may have been acted on)", e.Addr)
	} else {
		fmt.Fprintf(&b, "instance %s could not be connected to (nothing was sent)", e.Addr)
	}
	if len(e.Tried) > 1 {
		fmt.Fprintf(&b, " after tries of %s", strings.Join(e.Tried[:len(e.Tried)-1], ", "))
	}
	fmt.Fprintf(&b, "; not retried: %s: %v", e.Reason, e.Err)
	return b.String()
}

// Unwrap returns ErrConnectionFailed and the transport's error.
func (e *ConnectionError) Unwrap() []error { return []error{ErrConnectionFailed, e.Err} }

// WithRetryUnsent retries a request that is not idempotent too, when its
// connection failed before anything was sent (a refused or timed-out
// connect, a certificate that failed verification), as Envoy's
// connect-failure retry and grpc-go's transparent retry do: the instance
// cannot have acted on it. A request whose connection broke after it was
// written is still retried only when it is idempotent. The body must be
// replayable either way.
func WithRetryUnsent() TransportOption { return func(t *Transport) { t.retryUnsent = true } }

// failure is what a failed try tells of the request's fate.
type failure uint8

const (
	otherFailure failure = iota // not a connection failure: a timeout, a protocol error, the base's own
	unsent                      // no connection was made: nothing was sent
	lost                        // the connection broke before a response: the request may have been sent
	noAnswer                    // no response within the try timeout: the request was sent
)

// classify says what err, a try's error, tells of the request's fate.
func classify(err error) failure {
	if errors.Is(err, ErrTryTimeout) {
		return noAnswer
	}
	if connectFailure(err) {
		return unsent
	}
	for _, e := range []error{syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return lost
		}
	}
	return otherFailure
}

// connectFailure reports whether err means the connection was never made.
func connectFailure(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || certificateRejected(err)
}

// retry follows a first try, to call, that failed with err: it reports the
// failure, then sends the request again to another instance while the
// policy allows (see Transport) and returns the first response, or the
// error saying why it stopped.
func (t *Transport) retry(req *http.Request, routeCtx context.Context, reader graylb.ContextHandler, rt http.RoundTripper, clone *tlsClone, host string, route adapter.Route, call adapter.Call, err error) (*http.Response, error) {
	var tried []graylb.Instance
	var addrs []string
	isTried := func(in graylb.Instance) bool { // every spelling of an address tried (see Instance.SameAddr)
		for _, e := range tried {
			if e.SameAddr(in) {
				return true
			}
		}
		return false
	}
	for {
		if cerr := req.Context().Err(); cerr != nil {
			r, _ := adapter.ResultOf(cerr) // cancelled, or the caller's deadline passed without an answer
			call.End(r)
			return nil, err
		}
		f := classify(err)
		if f == noAnswer {
			call.End(adapter.DeadlineNoAnswer) // a failure of the instance, with the time waited
		} else {
			call.End(adapter.Failed)
		}
		if f == otherFailure {
			return nil, err
		}
		addr := t.addrs.of(call.Instance)
		tried = append(tried, call.Instance)
		addrs = append(addrs, addr)
		cerr := &ConnectionError{Method: methodOf(req), Service: host, Kind: route.Kind, Addr: addr, Tried: addrs, Sent: f == lost || f == noAnswer, Err: err}
		if cerr.Reason = t.notRetried(req, f, len(tried)); cerr.Reason != "" {
			return nil, cerr
		}
		next, rerr := t.lb.Reroute(routeCtx, route, isTried, reader)
		i, ok := next.NextUntried(isTried)
		if rerr != nil || !ok {
			cerr.Reason = fmt.Sprintf("no other instance can serve a %s request", route.Kind)
			return nil, cerr
		}
		call = next.Call(i)
		c := t.outgoing(req, host, t.addrs.of(call.Instance), next, !canonicalKeys(req.Header))
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				call.End(adapter.Cancelled) // never sent
				return nil, fmt.Errorf("httpctx: %s %s: replaying the body: %w", methodOf(req), host, gerr)
			}
			c.r.Body = body
		}
		resp, cancel, serr := t.send(rt, &c.r)
		if serr == nil {
			return t.answered(c, resp, call, clone, cancel), nil
		}
		err = serr
	}
}

// resendOverloaded follows a first try, to call, answered 429 (resp, its
// call ended at its body's end): when the request may be sent again (as
// after a connection that broke: idempotent, its body replayable, retries
// on) and an instance of its kind is left that was not tried, the answer
// is read and closed (the instance is paused: its Retry-After) and the
// request sent once more there, as Envoy's retry on 429; else the 429 is
// the answer.
func (t *Transport) resendOverloaded(req *http.Request, routeCtx context.Context, reader graylb.ContextHandler, rt http.RoundTripper, clone *tlsClone, host string, route adapter.Route, call adapter.Call, resp *http.Response) (*http.Response, error) {
	first := call.Instance
	isFirst := func(in graylb.Instance) bool { return in.SameAddr(first) }
	if req.Context().Err() != nil || t.notRetried(req, lost, 1) != "" {
		return resp, nil
	}
	next, rerr := t.lb.Reroute(routeCtx, route, isFirst, reader)
	i, ok := next.NextUntried(isFirst)
	if rerr != nil || !ok {
		return resp, nil
	}
	var body io.ReadCloser
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return resp, nil // the 429 stands
		}
		body = b
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	call = next.Call(i)
	c := t.outgoing(req, host, t.addrs.of(call.Instance), next, !canonicalKeys(req.Header))
	if body != nil {
		c.r.Body = body
	}
	again, cancel, err := t.send(rt, &c.r)
	if err != nil {
		return t.retry(req, routeCtx, reader, rt, clone, host, next, call, err)
	}
	return t.answered(c, again, call, clone, cancel), nil
}

// notRetried returns why a request whose try failed as f, after tries
// instances, is not sent again; "" when it is.
func (t *Transport) notRetried(req *http.Request, f failure, tries int) string {
	switch {
	case !idempotent(req) && (f == lost || f == noAnswer || !t.retryUnsent):
		return methodOf(req) + " is not idempotent"
	case !replayable(req):
		return "its body cannot be sent again (no GetBody)"
	case t.maxRetries == 0:
		return "retries are off"
	case tries > t.maxRetries:
		return fmt.Sprintf("%d tries, as many as WithMaxRetries(%d) allows", tries, t.maxRetries)
	}
	return ""
}

// idempotent: the method is (RFC 9110), or the request carries an
// idempotency key, as net/http decides before it sends a request again.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// replayable: the request has no body, or GetBody makes it again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

func methodOf(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}
