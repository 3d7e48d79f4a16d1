package shadow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/internal/engine"
)

// ErrWrite: a write made for a shadow copy was refused (see WriteError).
var ErrWrite = errors.New("shadow: a write was refused for a shadow copy")

// WriteError is a write refused for a shadow copy: it wraps ErrWrite and
// names the call.
type WriteError struct {
	Service string // the service called ("" for a Kafka topic's record)
	Call    string // "POST /orders", a gRPC full method, "record to topic orders"
}

func (e *WriteError) Error() string {
	if e.Service == "" {
		return fmt.Sprintf("%v: %s", ErrWrite, e.Call)
	}
	return fmt.Sprintf("%v: %s %s", ErrWrite, e.Call, e.Service)
}

// Unwrap returns ErrWrite.
func (e *WriteError) Unwrap() error { return ErrWrite }

// Is reports whether the request served with ctx is a copy a mirror made
// of a prod request: a shadow copy (sent to the gray build) or a noise
// sample (sent to prod again, see WithNoiseSample). Its writes are
// refused (Refuses) and its calls are not mirrored again.
func Is(ctx context.Context) bool { return adapter.Copied(ctx) }

type allowKey struct{}

// AllowWrites returns ctx whose calls may write under the shadow mark: for
// a dry-run endpoint that the gray build serves without side effects.
func AllowWrites(ctx context.Context) context.Context {
	return context.WithValue(ctx, allowKey{}, true)
}

// Refuses reports whether a call made with ctx that writes (see Safe) must
// be refused: the request is a shadow copy and the program did not allow
// its writes.
func Refuses(ctx context.Context) bool {
	return Is(ctx) && ctx.Value(allowKey{}) == nil
}

// Safe reports whether an HTTP method writes nothing (RFC 9110's safe
// methods: GET, HEAD, OPTIONS, TRACE): what a shadow copy may call.
func Safe(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "":
		return true
	}
	return false
}

// Mirrored reports whether an HTTP method is mirrored: GET, HEAD, OPTIONS.
func Mirrored(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "":
		return true
	}
	return false
}

// Event is what a LoadBalancer's shadow observer is told: one copy's
// outcome, or one write refused:
//
//	Service, Route string          // the service; the method and path (HTTP), the full method (gRPC)
//	Outcome        Outcome         // same, differs, failed, dropped, blocked-write, noise
//	Status, Latency, Body bool     // how the copy differed (Outcome Differs)
//	Paths          []string        // the JSON paths that differed, or were learned as noise
//	Primary, Copy  *Answer         // the two answers (bodies cut at the mirror's bound)
//	At             time.Time
type Event = engine.ShadowEvent

// Answer is one answer of a mirrored call: Status (HTTP status, or gRPC
// code), Latency, Body (cut at the bound), Err.
type Answer = engine.ShadowAnswer

// Outcome is what became of a copy (Event.Outcome).
type Outcome = engine.ShadowOutcome

// The outcomes.
const (
	Same         = engine.ShadowSame
	Differs      = engine.ShadowDiffers
	Failed       = engine.ShadowFailed
	Dropped      = engine.ShadowDropped
	BlockedWrite = engine.ShadowBlockedWrite
	Noise        = engine.ShadowNoise
)

// WithObserver has a LoadBalancer tell o of every shadow event, on the
// goroutine that ended the copy or refused the write. o must not block.
func WithObserver(o func(Event)) graylb.Option { return engine.WithShadowObserver(o) }

// Diffs returns the last copies of lb whose answers differed (at most 16,
// newest last), for a debug page.
func Diffs(lb *graylb.LoadBalancer) []Event { return (*engine.LoadBalancer)(lb).ShadowDiffs() }

// Percent returns the share of prod requests lb's rules mirror.
func Percent(lb *graylb.LoadBalancer) float64 { return (*engine.LoadBalancer)(lb).ShadowPercent() }

// Refused tells lb's shadow observers of a write refused for a shadow copy
// (an adapter calls it where it refuses one).
func Refused(lb *graylb.LoadBalancer, service, route string) {
	(*engine.LoadBalancer)(lb).Shadowed(Event{Service: service, Route: route, Outcome: BlockedWrite})
}

// HTTPRoute is the route a mirrored HTTP call is counted under: its method
// and path, each segment that is a number or a long hexadecimal id written
// "*" (GET /users/*), so that routes stay few.
func HTTPRoute(method, path string) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte(' ')
	for i, seg := range strings.Split(path, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if isID(seg) {
			seg = "*"
		}
		b.WriteString(seg)
	}
	return b.String()
}

// isID reports whether a path segment is a number or a hexadecimal id (at
// least 8 hex digits and dashes: a UUID).
func isID(seg string) bool {
	if seg == "" {
		return false
	}
	digits, hex := true, 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case '0' <= c && c <= '9':
			hex++
		case 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			digits = false
			hex++
		case c == '-':
			digits = false
		default:
			return false
		}
	}
	return digits || hex >= 8
}
