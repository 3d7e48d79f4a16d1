package httpctx

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// ErrTryTimeout: an instance sent no response headers within the
// Transport's try timeout (WithTryTimeout). A request whose last try ended
// so fails with a *ConnectionError that wraps it.
var ErrTryTimeout = errors.New("httpctx: no response within the try timeout")

// WithTryTimeout bounds each try of a request, from the moment it was
// written to the response's headers, as Envoy's per_try_timeout does: a
// try that gets no headers within d of being sent is abandoned and counts against its instance as a call
// that got no answer (outlier detection, P2C), and an idempotent request
// with a replayable body is sent again to another instance of its kind,
// within WithMaxRetries, as after a lost connection. A request that is
// not idempotent is not sent again (the instance may have acted on it).
// The request's own context still bounds the whole request. The body of a
// response is not bounded by d (WithBodyTimeout bounds it). d <= 0 (the
// default) sets no try timeout.
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
// is set: the timeout runs from the moment the request was written (a
// slow upload or a slow connect is bounded by the request's own context
// and the dialer, as Envoy's per-try timer starts once the request is
// sent). Its error wraps ErrTryTimeout when the timeout ended the try (and
// not the request's own context); a response whose headers came as the
// timeout fired is dropped then too, since its body is cut off. cancel
// releases the try's context once its response is done with (nil without
// a try timeout).
func (t *Transport) send(rt http.RoundTripper, out *http.Request) (_ *http.Response, cancel context.CancelFunc, _ error) {
	if t.tryTimeout <= 0 {
		resp, err := rt.RoundTrip(out)
		return resp, nil, err
	}
	parent := out.Context()
	ctx, cancel := context.WithCancel(parent)
	tt := &tryTimer{cancel: cancel}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { tt.arm(t.tryTimeout) },
	})
	resp, err := rt.RoundTrip(out.WithContext(ctx))
	expired := tt.finish()
	switch {
	case err != nil:
		cancel()
		if expired && parent.Err() == nil {
			return nil, nil, &tryTimeoutError{err: err}
		}
		return nil, nil, err
	case expired && parent.Err() == nil:
		resp.Body.Close()
		cancel()
		return nil, nil, &tryTimeoutError{err: context.Canceled}
	}
	return resp, cancel, nil
}

// tryTimer is the timer of one try: armed once the request is written,
// it cancels the try unless the try finished first.
type tryTimer struct {
	mu      sync.Mutex
	timer   *time.Timer
	done    bool // the round trip returned
	expired bool // the timer fired before it did
	cancel  context.CancelFunc
}

func (tt *tryTimer) arm(d time.Duration) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.done || tt.timer != nil {
		return
	}
	tt.timer = time.AfterFunc(d, func() {
		tt.mu.Lock()
		defer tt.mu.Unlock()
		if !tt.done {
			tt.expired = true
			tt.cancel()
		}
	})
}

// finish marks the round trip returned and reports whether the timer had
// ended the try.
func (tt *tryTimer) finish() bool {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.done = true
	if tt.timer != nil {
		tt.timer.Stop()
	}
	return tt.expired
}

// tryTimeoutError is a try the try timeout ended: it wraps ErrTryTimeout
// and the transport's error.
type tryTimeoutError struct{ err error }

func (e *tryTimeoutError) Error() string   { return ErrTryTimeout.Error() + ": " + e.err.Error() }
func (e *tryTimeoutError) Unwrap() []error { return []error{ErrTryTimeout, e.err} }
