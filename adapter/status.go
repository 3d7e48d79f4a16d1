package adapter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HTTPResult is the result of a call its instance answered with the HTTP
// status code status: the one reading of an answer's status that every
// adapter shares, so that an instance's behaviour counts the same over
// every transport and framework.
//
//   - 5xx is Failed (the instance failed the call: it counts against it,
//     and outlier detection ejects an instance that keeps answering so),
//     except:
//   - 504 Gateway Timeout is DeadlineAnswered: the instance answered, with
//     a timeout of its own (a deadline it set on its own work, or one
//     its own callee ran out of). It counts for the instance in its Stats
//     (a timeout further down says nothing of this instance's health, and
//     ejecting it would only move the load) and as failed for the
//     CallObserver (its caller saw the call fail).
//   - 501 Not Implemented is OK: the caller asked for something the
//     instance does not serve (a method, a route); another instance of the
//     same build would answer the same. A build that lacks a route shows
//     in the caller's own error handling, not as an unhealthy instance.
//   - 499 (a client closed the request, as a proxy answers it) is
//     Cancelled: the call was given up; it says nothing of the instance.
//   - 429 Too Many Requests is Overloaded: the instance shed the call.
//     It counts toward no ejection, but a fast refusal must not make the
//     instance look cheap, and it is paused (see Call.End).
//   - Every other status (1xx-4xx and codes outside 100-599) is OK: the
//     instance answered; the answer is the caller's affair.
//
// The reading matches that of the gRPC status codes a server sends
// (GRPCResult), by the HTTP status each code stands for: 503 is
// Unavailable, 500 Internal, Unknown or DataLoss, 504 DeadlineExceeded,
// 501 Unimplemented, 499 Canceled, 429 ResourceExhausted, 404 NotFound.
func HTTPResult(status int) Result {
	switch {
	case status == 504:
		return DeadlineAnswered
	case status == 501:
		return OK
	case status == 499:
		return Cancelled
	case status == 429:
		return Overloaded
	case status >= 500 && status <= 599:
		return Failed
	}
	return OK
}

// grpcHTTP is the HTTP status each gRPC status code stands for, by code
// (OK is 0, Unauthenticated 16), as gRPC's own HTTP mapping and the
// gRPC-HTTP gateways map them.
var grpcHTTP = [...]int{
	200, // OK
	499, // Canceled
	500, // Unknown
	400, // InvalidArgument
	504, // DeadlineExceeded
	404, // NotFound
	409, // AlreadyExists
	403, // PermissionDenied
	429, // ResourceExhausted
	400, // FailedPrecondition
	409, // Aborted
	400, // OutOfRange
	501, // Unimplemented
	500, // Internal
	503, // Unavailable
	500, // DataLoss
	401, // Unauthenticated
}

// GRPCStatusHTTP returns the HTTP status the gRPC status code code stands
// for (Unavailable 503, DeadlineExceeded 504, Unimplemented 501, ...); a
// code beyond those gRPC defines stands for 500, as Unknown does.
func GRPCStatusHTTP(code uint32) int {
	if int(code) < len(grpcHTTP) {
		return grpcHTTP[code]
	}
	return 500
}

// GRPCResult is the result of a call whose server sent the gRPC status
// code code: HTTPResult of the HTTP status the code stands for
// (GRPCStatusHTTP). Unavailable, Internal, Unknown, DataLoss and codes
// gRPC does not define are Failed; DeadlineExceeded is DeadlineAnswered;
// Canceled is Cancelled; ResourceExhausted is Overloaded; every other code
// (Unimplemented, NotFound, ...) is OK. A status the client made
// itself (the caller's deadline passed before any answer, a connection
// that failed) is not the server's: the adapter reads it apart.
func GRPCResult(code uint32) Result { return HTTPResult(GRPCStatusHTTP(code)) }

// MaxRetryAfter bounds what ParseRetryAfter returns: a day. (Outlier
// detection caps a pause further: graylb.OutlierConfig.MaxRetryAfter.)
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads an HTTP Retry-After value, as delay-seconds or as
// an HTTP-date (relative to now), at most MaxRetryAfter. It returns 0 for
// an empty, malformed, negative or past value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" { // delay-seconds
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n >= uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter // err: beyond 64 bits
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter)
}
