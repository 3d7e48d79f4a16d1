package adaptertest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fault is an answer a server of the suite gives in place of its Answer
// (ServerOptions.Fault): the driver answers it with the status its
// transport has for it (HTTPStatus, GRPCCode).
type Fault uint32

const (
	// NoFault: the Answer.
	NoFault Fault = iota
	// ServerError: the instance failed the call (HTTP 503, gRPC
	// Unavailable).
	ServerError
	// OwnTimeout: the instance answers with a timeout of its own, at once,
	// long before its caller's deadline (HTTP 504, gRPC DeadlineExceeded).
	OwnTimeout
	// NotImplemented: the instance does not serve what it was asked
	// (HTTP 501, gRPC Unimplemented).
	NotImplemented
	// ClientError: the caller asked for something that is not there
	// (HTTP 404, gRPC NotFound).
	ClientError
	// Overloaded: the instance sheds the call (HTTP 429, gRPC
	// ResourceExhausted).
	Overloaded
)

var faultNames = [...]string{"no-fault", "server-error", "own-timeout", "not-implemented", "client-error", "overloaded"}

// String names the fault.
func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// HTTPStatus is the HTTP status an HTTP server answers f with (200 for
// NoFault and unknown faults).
func (f Fault) HTTPStatus() int {
	switch f {
	case ServerError:
		return 503
	case OwnTimeout:
		return 504
	case NotImplemented:
		return 501
	case ClientError:
		return 404
	case Overloaded:
		return 429
	}
	return 200
}

// GRPCCode is the gRPC status code (google.golang.org/grpc/codes, by
// number) a gRPC server answers f with (OK for NoFault and unknown
// faults): Unavailable, DeadlineExceeded, Unimplemented, NotFound,
// ResourceExhausted.
func (f Fault) GRPCCode() uint32 {
	switch f {
	case ServerError:
		return 14
	case OwnTimeout:
		return 4
	case NotImplemented:
		return 12
	case ClientError:
		return 5
	case Overloaded:
		return 8
	}
	return 0
}

// FaultError is Respond's error for a server whose ServerOptions.Fault
// holds a fault: the driver answers it with Fault's status (FaultOf).
type FaultError struct{ Fault Fault }

func (e *FaultError) Error() string { return "adaptertest: this instance answers " + e.Fault.String() }

// FaultOf returns the fault err (Respond's error) asks the driver to
// answer with; ok is false for any other error, which the driver answers
// with its server error.
func FaultOf(err error) (f Fault, ok bool) {
	var fe *FaultError
	if errors.As(err, &fe) {
		return fe.Fault, true
	}
	return NoFault, false
}

// answers: an instance's answer counts the same over every adapter, by
// the one reading of package adapter (adapter.HTTPResult,
// adapter.GRPCResult). An instance that answers with
//   - a server error (503, Unavailable) fails its calls: the CallObserver
//     is told they failed, and outlier detection ejects it;
//   - a timeout of its own (504, DeadlineExceeded it sent): the
//     CallObserver is told they failed, but it answered: it is not
//     ejected;
//   - not implemented (501, Unimplemented) or a client error (404,
//     NotFound): its calls are told ok, and it is not ejected;
//   - overload (429, ResourceExhausted): its calls are told failed, and
//     it is paused (out of rotation: Stats.Ejected), never ejected;
//   - nothing before its callers' deadlines (it hangs): the CallObserver
//     is told they failed, and it is ejected (over gRPC, a
//     DeadlineExceeded the client made is no answer).
//
// Every such call fails for its caller. Each fault is served by a service
// of its own, so that a framework's client breaker (go-zero's, per target)
// opened by one does not reject the next one's calls.
func answers(t *testing.T, d *Driver) {
	const failures = 3
	for _, c := range []struct {
		name    string
		fault   Fault
		callOK  bool // the CallObserver is told the calls were ok
		ejected bool
	}{
		{"server-error", ServerError, false, true},
		{"own-timeout", OwnTimeout, false, false},
		{"not-implemented", NotImplemented, true, false},
		{"client-error", ClientError, true, false},
		{"overloaded", Overloaded, false, true}, // paused, not ejected (reasons)
		{"no-answer", NoFault, false, true},     // it hangs: each call ends at its caller's deadline
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, d)
			var obs observer
			var fault atomic.Uint32
			var reasons sync.Map // the reasons of the take-outs
			lb, slb := e.lb(graylb.WithCallObserver(obs.observe), graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: failures,
				OnEjection: func(ev graylb.Ejection) { reasons.Store(ev.Reason, true) }})), e.lb()
			service := "svc-" + c.name // a framework's client breaker is per service
			var hang atomic.Bool
			in := e.serve(slb, service, "prod-1", nil, ServerOptions{Fault: &fault, Hang: &hang})
			svc := e.dial(lb, service)
			ready(t, svc, nil, "prod-1")
			stats := statsOf(t, lb, service, "false")
			obs.wait(t, 1)
			obs.reset()

			fault.Store(uint32(c.fault))
			hang.Store(c.fault == NoFault)
			// Calls until the instance was called calls times (a client's
			// breaker, go-zero's, may refuse some without calling it) and,
			// when it is to be ejected, until it is: a server that hangs
			// may answer at the deadline it was given, a hair before its
			// caller gives up (an answer, which breaks the failures' run).
			const calls = 2 * failures
			for i := 0; obs.count() < calls || c.ejected && !stats.Ejected(); i++ {
				require.Less(t, i, 40, "%s: an instance answering %s: 40 calls, %d of them told to the CallObserver, and it was not ejected", d.Name, c.name, obs.count())
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				if c.fault == NoFault {
					ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
				}
				a, err := svc(ctx, nil)
				cancel()
				require.Error(t, err, "%s: an instance answering %s: the call succeeded with %+v", d.Name, c.name, a)
			}
			obs.wait(t, calls) // a client that retries tells more
			outcome := "error"
			if c.callOK {
				outcome = "ok"
			}
			seen := obs.seen()
			assert.Equal(t, []string{in.inst.Addr() + " prod " + outcome}, keysOf(seen),
				"%s: an instance answering %s (%d calls): the CallObserver was told %v", d.Name, c.name, calls, seen)
			if c.ejected {
				waitUntil(t, stats.Ejected, "%s: an instance answering %s %d times was not ejected", d.Name, c.name, calls)
			} else {
				assert.False(t, stats.Ejected(), "%s: an instance answering %s %d times was ejected", d.Name, c.name, calls)
			}
			_, ejected := reasons.Load("consecutive-failures")
			_, paused := reasons.Load("overloaded")
			if c.fault == Overloaded {
				assert.True(t, paused && !ejected, "%s: an instance answering %s was not paused, or was ejected", d.Name, c.name)
			}
		})
	}
}

// keysOf returns m's keys, in no order when there are several.
func keysOf(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
