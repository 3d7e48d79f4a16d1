package httpctx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb/adapter"
)

// ErrBodyTimeout: a response's body did not reach its end within the
// Transport's body timeout (WithBodyTimeout). The body was cut; the read
// that finds it so returns an error wrapping it.
var ErrBodyTimeout = errors.New("httpctx: response body not read to its end within the body timeout")

// WithBodyTimeout bounds each response's body, from its headers to its
// end: a body not read to its end d after its headers came (one that
// stalls, or trickles a byte at a time) is cut, its call counts against
// its instance as one it did not answer in time (outlier detection, P2C),
// and the caller's read returns an error wrapping ErrBodyTimeout. The time
// the caller takes between its reads counts too, as with
// http.Client.Timeout. Together with WithTryTimeout (to the headers) it
// bounds a whole try. d <= 0 (the default) sets none: the caller's
// context bounds the body, and a body that outlives it counts against
// the instance as well.
func WithBodyTimeout(d time.Duration) TransportOption {
	return func(t *Transport) {
		if d > 0 {
			t.bodyTimeout = d
		}
	}
}

// answered returns resp, the answer to the try c whose call is call, with
// c as its body, so that the call ends with the body (see body). cancel
// releases the try's context (WithTryTimeout; nil when none); clone is the
// TLS clone that sent it (nil when none).
//
// A response without a body (http.NoBody: HEAD, 204, 304) ends at once;
// so does a protocol switch (101), whose body is the connection of
// another protocol for as long as it lives: the HTTP exchange is over.
func (t *Transport) answered(c *requestCopy, resp *http.Response, call adapter.Call, clone *tlsClone, cancel context.CancelFunc) *http.Response {
	r := t.resultOf(resp.StatusCode)
	if r == adapter.Overloaded {
		call = call.WithRetryAfter(adapter.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		call.End(r)
		if cancel != nil {
			cancel()
		}
		if clone != nil {
			clone.release()
		}
		return resp
	}
	b := &c.b
	b.rc, b.cancel = resp.Body, cancel
	if _, ok := resp.Body.(io.ReadWriteCloser); ok { // a protocol switch: the caller owns the connection
		call.End(r)
		if cancel != nil {
			b.state.Store(bodyEnded)
			resp.Body = bodyRW{c}
		}
		return resp
	}
	b.call, b.answer, b.clone = call, r, clone
	if b.track = call.Tracked(); b.track {
		b.last.Store(clock())
	}
	if t.bodyTimeout > 0 {
		b.timer = time.AfterFunc(t.bodyTimeout, c.cut)
	}
	resp.Body = c
	return resp
}

// body is the state of a try's response body, whose call ends with it,
// as the caller is done with it, whichever comes first:
//   - read to its end (io.EOF): the answer's result (its status's), its
//     duration to the end;
//   - a read fails: the caller's context ended (adapter.ResultOf of its
//     error; a deadline is no answer in time: a failure, with the time
//     waited), else the instance failed the call (adapter.Failed: reset,
//     cut short);
//   - cut by the body timeout: adapter.DeadlineNoAnswer;
//   - closed before its end: the answer's result, its duration to the
//     last byte read (the caller read what it needed; what it does after
//     is its own time), unless the caller's context had ended (as for a
//     failed read).
//
// It then releases the try's context and, for a TLS clone dropped
// meanwhile, the connection it pooled. The try's requestCopy is the body
// the caller reads (its request's context is the caller's): one
// allocation for the request and its response's body.
type body struct {
	rc     io.ReadCloser
	call   adapter.Call
	cancel context.CancelFunc // the try's context; nil when none
	clone  *tlsClone          // nil when none
	timer  *time.Timer        // WithBodyTimeout's; nil when none
	last   atomic.Int64       // when the last byte came (clock), while track
	state  atomic.Uint32      // body* bits
	answer adapter.Result
	track  bool // the call reports something (adapter.Call.Tracked)
	// The small fields last, beside state: padding between them would
	// push the request copy's allocation into the next size class.
}

const (
	bodyEnded  uint32 = 1 << iota // the call ended
	bodyClosed                    // rc is closed
	bodyCut                       // the body timeout ended the call
)

// epoch anchors clock.
var epoch = time.Now()

// clock returns the monotonic time since epoch, in nanoseconds (> 0).
func clock() int64 { return int64(time.Since(epoch)) }

func (c *requestCopy) Read(p []byte) (int, error) {
	b := &c.b
	n, err := b.rc.Read(p)
	switch {
	case err == nil:
		if n > 0 && b.track {
			b.last.Store(clock())
		}
	case err == io.EOF:
		c.end(b.answer, false)
		c.finish()
	default:
		c.end(c.failure(), false)
		if b.state.Load()&bodyCut != 0 {
			err = &bodyTimeoutError{err: err}
		}
		c.finish()
	}
	return n, err
}

func (c *requestCopy) Close() error {
	if c.b.state.Load()&bodyEnded == 0 {
		if r, done := callerDone(c.r.Context()); done {
			c.end(r, false)
		} else {
			c.end(c.b.answer, true)
		}
	}
	err := c.close()
	c.finish()
	return err
}

// cut is the body timeout's: it ends the call unless it has ended, and
// closes the body under its reader.
func (c *requestCopy) cut() {
	b := &c.b
	for {
		s := b.state.Load()
		if s&bodyEnded != 0 {
			return
		}
		if b.state.CompareAndSwap(s, s|bodyEnded|bodyCut) {
			break
		}
	}
	b.call.End(adapter.DeadlineNoAnswer)
	c.close()
	c.finish()
}

// end ends the call with r unless it has ended: at the last byte read when
// early (the body was closed before its end), else now.
func (c *requestCopy) end(r adapter.Result, early bool) {
	b := &c.b
	if b.state.Load()&bodyEnded != 0 || b.state.Or(bodyEnded)&bodyEnded != 0 {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	if early && b.track {
		b.call.EndAt(r, epoch.Add(time.Duration(b.last.Load())))
		return
	}
	b.call.End(r)
}

// failure is the result of a read that failed: how the caller's context
// ended, else a failure of the instance.
func (c *requestCopy) failure() adapter.Result {
	if r, done := callerDone(c.r.Context()); done {
		return r
	}
	return adapter.Failed
}

// close closes the body once.
func (c *requestCopy) close() error {
	if c.b.state.Load()&bodyClosed != 0 || c.b.state.Or(bodyClosed)&bodyClosed != 0 {
		return nil
	}
	return c.b.rc.Close()
}

// finish releases what the try holds once its body ended: its context,
// and the pooled connection of a TLS clone dropped meanwhile.
func (c *requestCopy) finish() {
	if c.b.cancel != nil {
		c.b.cancel()
	}
	if c.b.clone != nil {
		c.b.clone.release()
	}
}

// callerDone reports whether the caller's context has ended, and how:
// cancelled, or its deadline passed (also when it passed a hair before the
// context says so: a read its deadline cut may return first).
func callerDone(ctx context.Context) (adapter.Result, bool) {
	if err := ctx.Err(); err != nil {
		return adapter.ResultOf(err)
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return adapter.DeadlineNoAnswer, true
	}
	return adapter.OK, false
}

// bodyRW is the body of a protocol switch, the connection, which stays
// writable.
type bodyRW struct{ *requestCopy }

func (b bodyRW) Write(p []byte) (int, error) { return b.b.rc.(io.Writer).Write(p) }

// bodyTimeoutError is the error of a read of a body the body timeout cut:
// it wraps ErrBodyTimeout and the read's error.
type bodyTimeoutError struct{ err error }

func (e *bodyTimeoutError) Error() string   { return ErrBodyTimeout.Error() + ": " + e.err.Error() }
func (e *bodyTimeoutError) Unwrap() []error { return []error{ErrBodyTimeout, e.err} }
