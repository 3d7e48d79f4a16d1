package httpctx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrTryTimeout: an instance sent no response headers within the
// Transport's try timeout (WithTryTimeout). A request whose last try ended
// so fails with a *ConnectionError that wraps it.
var ErrTryTimeout = errors.New("httpctx: no response within the try timeout")

// WithTryTimeout bounds each try of a request, from sending it to the
// response's headers, as Envoy's per_try_timeout does: a try that gets no
// headers within d is abandoned and counts against its instance as a call
// that got no answer (outlier detection, P2C), and an idempotent request
// with a replayable body is sent again to another instance of its kind,
// within WithMaxRetries, as after a lost connection. A request that is
// not idempotent is not sent again (the instance may have acted on it).
// The request's own context still bounds the whole request. The body of a
// response is not bounded by d. d <= 0 (the default) sets no try timeout.
//
// Without a try timeout an instance that accepts connections and never
// answers (a black hole) holds each request sent to it until the
// request's own deadline; with one, the request is answered by another
// instance d later.
func WithTryTimeout(d time.Duration) TransportOption {
	return func(t *Transport) {
		if d > 0 {
			t.tryTimeout = d
		}
	}
}

// send sends one try of out with rt, bounded by the try timeout when one
// is set; its error wraps ErrTryTimeout when the timeout ended the try
// (and not the request's own context).
func (t *Transport) send(rt http.RoundTripper, out *http.Request) (*http.Response, error) {
	if t.tryTimeout <= 0 {
		return rt.RoundTrip(out)
	}
	parent := out.Context()
	ctx, cancel := context.WithCancel(parent)
	var mu sync.Mutex
	expired := false
	timer := time.AfterFunc(t.tryTimeout, func() {
		mu.Lock()
		expired = true
		mu.Unlock()
		cancel()
	})
	resp, err := rt.RoundTrip(out.WithContext(ctx))
	timer.Stop()
	if err != nil {
		cancel()
		mu.Lock()
		ended := expired
		mu.Unlock()
		if ended && parent.Err() == nil {
			return nil, &tryTimeoutError{err: err}
		}
		return nil, err
	}
	// Headers that came as the timer fired stand; their body may be cut
	// off by the cancelled context, which its reader then sees.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// tryTimeoutError is a try the try timeout ended: it wraps ErrTryTimeout
// and the transport's error.
type tryTimeoutError struct{ err error }

func (e *tryTimeoutError) Error() string   { return ErrTryTimeout.Error() + ": " + e.err.Error() }
func (e *tryTimeoutError) Unwrap() []error { return []error{ErrTryTimeout, e.err} }

// cancelOnClose releases a try's context when the response body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
