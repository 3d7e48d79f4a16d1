package adapter

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
	"github.com/graylb/graylb/policy"
)

// Result is how a call ended, as the adapter that made it reads its
// transport's answer: what Call.End reports to the instance's Stats
// (outlier detection, latency-aware policies) and to the LoadBalancer's
// graylb.CallObserver. Every adapter ends every call with one of these,
// whatever the policy, so that every transport feeds ejection, P2C and
// the call metrics alike.
type Result uint8

const (
	// OK: the instance answered, and its answer does not count against
	// it (an HTTP 2xx-4xx or 501, a gRPC status outside the failure
	// codes; see HTTPResult).
	OK Result = iota
	// Failed: the call failed in a way that counts against the instance:
	// a refused or lost connection, an HTTP 5xx but 501 and 504, gRPC
	// Unavailable (HTTPResult and GRPCResult are the default reading of
	// an answer; an adapter's configuration may widen or narrow it).
	Failed
	// Cancelled: the caller cancelled the call before it ended. It says
	// nothing of the instance.
	Cancelled
	// DeadlineNoAnswer: the caller's deadline passed before the instance
	// answered.
	DeadlineNoAnswer
	// DeadlineAnswered: the instance answered with a timeout of its own
	// (an HTTP 504, a gRPC DeadlineExceeded status that the server sent),
	// whether or not the caller's deadline passed too: it answered.
	DeadlineAnswered
	// Overloaded: the instance answered that it is overloaded (an HTTP
	// 429, a gRPC ResourceExhausted status the server sent).
	Overloaded
)

var resultNames = [...]string{"ok", "failed", "cancelled", "deadline-no-answer", "deadline-answered", "overloaded"}

// String returns the result's name: ok, failed, cancelled,
// deadline-no-answer, deadline-answered or overloaded.
func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// Answer returns the result of a call its instance answered: Failed when
// the answer counts against the instance, else OK.
func Answer(failed bool) Result {
	if failed {
		return Failed
	}
	return OK
}

// ResultOf reads the result of a call that ended with err as far as a
// transport-neutral reading goes: nil is OK; an error that is or wraps
// context.Canceled is Cancelled; one that is or wraps
// context.DeadlineExceeded is DeadlineNoAnswer (the caller's own deadline
// ended the call in the caller's process, before an answer). ok is false
// for every other error: the adapter maps its transport's errors (a gRPC
// status code, an HTTP status, a framework's error) itself. Pass a
// context's Err to read why the caller's context ended.
func ResultOf(err error) (r Result, ok bool) {
	switch {
	case err == nil:
		return OK, true
	case errors.Is(err, context.Canceled):
		return Cancelled, true
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineNoAnswer, true
	}
	return Failed, false
}

// Call is one call to a candidate of a Route, from Route.Call to End: the
// service, the instance and the request's kind it was made for, which a
// report of its outcome carries. It is a small value: passing it around
// does not allocate. The zero Call is valid and End on it does nothing.
type Call struct {
	Instance graylb.Instance
	Service  string
	Kind     graylb.Kind
	served   graylb.Kind // the kind of the instances that serve it, for a graylb.CallObserver
	b        *Balancer
	stats    *policy.Stats
	start    int64 // on graylb's monotonic clock; 0 when neither Stats nor a CallObserver are kept
	// retryAfter is the pause an overloaded instance asked for (WithRetryAfter).
	retryAfter time.Duration
}

// End ends the call with its result. It ends the call's in-flight count
// and reports it:
//
//   - OK and Failed: to the instance's Stats, its latency and its success
//     or failure (outlier detection counts failures); to the
//     CallObserver, ok or failed, with its duration.
//   - Cancelled: nothing; the call only leaves the in-flight count.
//   - DeadlineAnswered: to the Stats as OK (the instance answered); to the
//     CallObserver as failed (its caller saw it fail, and a build that
//     hangs must show in the call metrics).
//   - DeadlineNoAnswer: to the CallObserver as failed; to the Stats as
//     Failed, with the time waited as its latency: an instance that did
//     not answer in time failed the call (one that hangs, or answers only
//     after the deadline, is ejected and avoided).
//   - Overloaded: to the CallObserver as failed; to the Stats as neither:
//     P2C prices the instance as after a failure and outlier detection
//     pauses it (graylb.OutlierConfig.OverloadPause, or what
//     WithRetryAfter gave) without counting toward its ejection.
//
// A Result of another value is Failed. Call End or EndAt exactly once per
// call.
func (c Call) End(r Result) { c.end(r, time.Time{}, false) }

// EndAt ends the call as End does, its duration measured to at instead of
// now: for a call whose instance's part ended before its caller was done
// with it (an HTTP body closed before its end, at its last byte read). An
// at before the call's start is its start.
func (c Call) EndAt(r Result, at time.Time) { c.end(r, at, true) }

// WithRetryAfter returns c with the time its instance asked its callers to
// wait (an HTTP Retry-After, see ParseRetryAfter; gRPC's
// grpc-retry-pushback-ms), which End and EndAt read for an Overloaded
// result: the instance's pause (0: the default pause).
func (c Call) WithRetryAfter(d time.Duration) Call {
	c.retryAfter = d
	return c
}

// end is End, at at when byAt (never after now).
func (c Call) end(r Result, at time.Time, byAt bool) {
	stats := c.stats
	a, callOK := engine.AnswerOK, true
	switch r {
	case OK:
	case Cancelled:
		if stats != nil {
			engine.Discard(stats)
		}
		return
	case DeadlineAnswered:
		callOK = false
	case Overloaded:
		a, callOK = engine.AnswerOverloaded, false
	default: // Failed, DeadlineNoAnswer, any other
		a, callOK = engine.AnswerFailed, false
	}
	observed := c.b != nil && c.b.e().CallObserved()
	if stats == nil && !observed {
		return
	}
	end := engine.Now()
	if byAt {
		end = min(max(engine.At(at), c.start), end)
	}
	if observed {
		c.b.e().DoneObserved(c.Service, c.Instance, c.served, c.Kind, stats, c.start, end, a, c.retryAfter, callOK)
	} else {
		engine.End(stats, c.start, end, c.Kind, a, c.retryAfter)
	}
}

// Tracked reports whether End reports anything: the LoadBalancer keeps
// the instance's Stats or has a CallObserver. An adapter may skip handing
// its transport a callback for a call that is not tracked.
func (c Call) Tracked() bool {
	return c.stats != nil || c.b != nil && c.b.e().CallObserved()
}

// Stats returns the instance's Stats (nil when the LoadBalancer keeps
// none: no outlier detection and a policy that reads none).
func (c Call) Stats() *policy.Stats { return c.stats }
