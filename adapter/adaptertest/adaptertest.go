// Package adaptertest is the conformance suite of graylb's adapters: what
// every server side and client side written against package adapter owes
// its users, tested once, over real servers and clients of each adapter,
// as testing/fstest.TestFS tests any file system.
//
// An adapter's tests bring a small Driver (start its server side on a
// listener, make a call with its client side) and run the suite:
//
//	func TestConformance(t *testing.T) { adaptertest.Run(t, driver) }
//
// Run's subtests are the contract: the letter case of key names and
// values, a LoadBalancer with no option at all, renamed keys, match rules
// and their lanes, the trust boundary, the CallObserver under every
// policy, outlier ejection, how an instance's answers count (server
// errors, timeouts of its own, not implemented, client errors), a call
// that ends when its caller is done with its answer (a body or stream
// that comes late, stalls, breaks off or is abandoned), an instance's
// abrupt death, the shadow mark (a shadow copy reaches gray instances
// only, on every hop), and the
// allocations a call adds. Each subtest's doc comment (suite.go: routing,
// keys and the trust boundary; calls.go: what calls report and how
// instances fail) says what it holds the adapter to. What an adapter legitimately cannot do its
// Driver names in Lacks, with why; the subtests that need it are skipped
// with that reason, never silently. A message adapter runs the parts that
// apply to a record (RunRecords); a carrier that is no transport of its
// own runs the parts about keys through a transport's driver (RunKeys).
//
// The package uses the standard library and testify only, so that it
// stays in graylb's root module.
package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
)

// Driver is what an adapter's tests give Run: how to start the adapter's
// server side and how to call through its client side. Serve and Dial are
// required; everything else is optional.
type Driver struct {
	// Name names the adapter in the suite's messages ("httpctx").
	Name string

	// Options are the LoadBalancer options a program using the adapter
	// gives every LoadBalancer, as its documentation shows (a
	// ContextHandler, say); the suite adds its own after them. The
	// NoOptions subtest gives none.
	Options []graylb.Option

	// Serve serves calls on l with the adapter's server side over lb (its
	// key names, its match rules), configured as o says, until t ends
	// (t.Cleanup). It returns once the server accepts calls. Each call is
	// admitted by the adapter (its middleware or interceptors), then
	// answered with what Respond returns for it, given the call's context
	// as the handler has it and the keys the handler received (headers,
	// metadata); an error of Respond is answered with the adapter's server
	// error: one its client side counts as a failure of the instance (an
	// HTTP 500, gRPC Unavailable). A server that cannot serve on a given
	// listener serves elsewhere and has Proxy forward l's connections.
	Serve func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o ServerOptions)

	// Dial returns a Client of service through the adapter's client side
	// over lb, service's instances being in reg. It is closed when t ends.
	Dial func(t *testing.T, reg *graylb.Registry, lb *graylb.LoadBalancer, service string) Client

	// Direct returns a Client over the same transport as Dial's, with the
	// same framework's client where there is one, that calls the server at
	// addr (host:port) without graylb: the baseline of the Allocations
	// subtest, which is skipped when Direct is nil.
	Direct func(t *testing.T, addr string) Client

	// MaxAllocs bounds the allocations Dial's Client adds to one call over
	// Direct's same call to the same server (testing.AllocsPerRun of each,
	// the server's share cancelling out).
	MaxAllocs float64

	// Stream returns a StreamClient of service, as Dial returns a Client,
	// over the same client side: the CallEnds subtest, which is skipped
	// when Stream is nil, calls with it.
	Stream func(t *testing.T, reg *graylb.Registry, lb *graylb.LoadBalancer, service string) StreamClient

	// Lacks names what the adapter legitimately cannot do, each with why;
	// the subtests that need it are skipped with that reason.
	Lacks map[Capability]string
}

// Capability is something a subtest needs of an adapter beyond the
// contract every adapter keeps.
type Capability string

const (
	// RetryOnDeath: an idempotent call whose instance died abruptly
	// (connections reset, then refused, the registry still listing it) is
	// sent again to another instance of its kind, or the client's routing
	// stops picking the dead instance before the next call, so that no
	// call made after the death fails (AbruptDeath).
	RetryOnDeath Capability = "retry-on-death"
	// Abandon: a StreamClient can abandon an answer after its first part
	// (close the body, cancel the stream) (CallEnds).
	Abandon Capability = "abandon"
)

// ServerOptions is how Serve configures one instance's server side.
type ServerOptions struct {
	// ID names the instance in its Answers.
	ID string
	// Trusted, when not nil, makes the server a trust boundary: the
	// adapter's trust predicate (httpctx.WithTrusted, grpcctx.WithTrusted,
	// ...) returns Trusted(get), get reading the incoming call's keys
	// (headers, metadata) by name in any letter case.
	Trusted func(get func(name string) string) bool
	// User, when not nil, is the program's user id for each call (the
	// adapter's WithUser option), get reading the incoming call's keys as
	// for Trusted.
	User func(get func(name string) string) string
	// Propagated are names the server side keeps and passes on beside the
	// LoadBalancer's keys (the adapter's WithPropagated option).
	Propagated []string
	// Fail, while it holds true, answers every call with the adapter's
	// server error (Respond returns ErrFailing). Nil: never.
	Fail *atomic.Bool
	// Hang, while it holds true, answers no call: each ends with its
	// caller's deadline (Respond returns when the call's context ends).
	// Nil: never.
	Hang *atomic.Bool
	// Fault, while it holds a Fault other than NoFault, answers every
	// call with it (Respond returns a *FaultError; the driver answers
	// its status, see FaultOf). Nil: never.
	Fault *atomic.Uint32
	// Rest, while it holds a Rest other than RestAtOnce, is how the
	// answer to a streamed call goes on after its first part: an HTTP
	// body after the Answer's line (WriteHTTP), a gRPC server stream after
	// its first message. Nil: at once.
	Rest *atomic.Uint32
	// Next, when not nil, is called by Respond with the served call's
	// context and no keys of its own, as a handler calls the next service;
	// its answer is the Answer's Next.
	Next Client
}

// Client makes one idempotent call (an HTTP GET, a unary RPC of a method
// the client declares idempotent: grpcctx.Idempotent) with ctx,
// carrying keys on the call as a program sets them on its transport:
// HTTP headers with http.Header.Add (several spellings of one name are one
// header, repeated), gRPC metadata (whose names gRPC lowers). It returns
// the server's Answer, or an error when the call failed or was answered
// with a server error.
type Client func(ctx context.Context, keys map[string]string) (Answer, error)

// StreamClient makes one idempotent call whose answer comes in two parts,
// with ctx and keys as a Client does: an HTTP GET whose body is the
// Answer's line and then the rest (WriteHTTP), a gRPC server stream of the
// Answer's message and then another. It returns the Answer of the first
// part; with whole it then reads the answer to its end, and returns an
// error when the rest does not come whole (ctx ended, the connection broke,
// a failing status); without whole it abandons the rest (closes the body,
// cancels the stream) once the first part came.
type StreamClient func(ctx context.Context, keys map[string]string, whole bool) (Answer, error)

// Rest is how a streamed answer goes on after its first part
// (ServerOptions.Rest).
type Rest uint32

const (
	// RestAtOnce: the rest follows at once.
	RestAtOnce Rest = iota
	// RestLate: the rest follows RestDelay later.
	RestLate
	// RestStall: nothing more comes until the call's context ends.
	RestStall
	// RestBreak: the answer breaks off: the HTTP connection is reset, the
	// gRPC stream fails with Unavailable.
	RestBreak
)

// RestDelay is how long a RestLate answer's rest takes.
const RestDelay = 150 * time.Millisecond

// RestOf returns how o's answer goes on after its first part.
func RestOf(o ServerOptions) Rest {
	if o.Rest == nil {
		return RestAtOnce
	}
	return Rest(o.Rest.Load())
}

// Answer is what a server of the suite answers: which instance answered,
// the keys it received, and what the next service answered it.
type Answer struct {
	Instance string              `json:"instance"`
	Keys     map[string][]string `json:"keys,omitempty"` // names in lower case
	Next     *Answer             `json:"next,omitempty"`
	NextErr  string              `json:"nextErr,omitempty"` // the next call's error
}

// Key returns the first value received under name, in any letter case;
// "" when none.
func (a Answer) Key(name string) string {
	if v := a.Keys[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Has reports whether a value was received under name, in any letter case.
func (a Answer) Has(name string) bool { return len(a.Keys[strings.ToLower(name)]) > 0 }

// Encode returns a as the bytes a server writes (JSON).
func (a Answer) Encode() []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic(err) // strings and maps of strings always marshal
	}
	return b
}

// ParseAnswer parses what Encode wrote.
func ParseAnswer(b []byte) (Answer, error) {
	var a Answer
	err := json.Unmarshal(b, &a)
	return a, err
}

// ErrFailing is Respond's error for a server with ServerOptions.Fail.
var ErrFailing = errors.New("adaptertest: this instance fails every call")

// Respond is the handler every driver's server runs for a call served with
// ctx (the adapter's server side having admitted it) whose keys received
// holds (headers or metadata, names in any letter case): it returns the
// Answer, or ErrFailing (ServerOptions.Fail), or a *FaultError
// (ServerOptions.Fault), or ctx's error once ctx ends (ServerOptions.Hang).
// The driver writes the Answer with Encode, answers a *FaultError with the
// status its transport has for the fault (FaultOf, Fault.HTTPStatus,
// Fault.GRPCCode), and any other error with its adapter's server error.
func Respond(ctx context.Context, o ServerOptions, received map[string][]string) (Answer, error) {
	if o.Hang != nil && o.Hang.Load() {
		<-ctx.Done()
		return Answer{}, ctx.Err()
	}
	if o.Fail != nil && o.Fail.Load() {
		return Answer{}, ErrFailing
	}
	if o.Fault != nil {
		if f := Fault(o.Fault.Load()); f != NoFault {
			return Answer{}, &FaultError{Fault: f}
		}
	}
	a := Answer{Instance: o.ID}
	for k, v := range received {
		if a.Keys == nil {
			a.Keys = map[string][]string{}
		}
		k = strings.ToLower(k)
		a.Keys[k] = append(a.Keys[k], v...)
	}
	if o.Next != nil {
		n, err := o.Next(ctx, nil)
		if err != nil {
			a.NextErr = err.Error()
		} else {
			a.Next = &n
		}
	}
	return a, nil
}

// Listener is a loopback TCP listener whose server the suite can kill as
// kill -9 kills a process: Kill closes it and resets (RST) every
// connection it accepted, without draining anything.
type Listener struct {
	net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

// Listen returns a Listener on 127.0.0.1, closed when t ends.
func Listen(t testing.TB) *Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("adaptertest: listen: %v", err)
	}
	kl := &Listener{Listener: l}
	t.Cleanup(kl.Kill)
	return kl
}

// Accept accepts a connection and keeps it for Kill.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.killed { // accepted as Kill ran
		reset(c)
		return nil, net.ErrClosed
	}
	l.conns = append(l.conns, c)
	return c, nil
}

// Port returns the port it listens on.
func (l *Listener) Port() int { return l.Addr().(*net.TCPAddr).Port }

// Kill closes the listener and resets every connection it accepted.
func (l *Listener) Kill() {
	l.Listener.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.killed = true
	for _, c := range l.conns {
		reset(c)
	}
	l.conns = nil
}

// reset closes c with RST, as the kernel does for a killed process.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// Proxy forwards every connection l accepts to addr until l is closed,
// for a server that listens on an address of its own (go-zero's): killing
// l (Listener.Kill) then resets its callers' connections as if the server
// died. It returns at once.
func Proxy(l net.Listener, addr string) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				up, err := net.Dial("tcp", addr)
				if err != nil {
					reset(c)
					return
				}
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					io.Copy(dst, src)
					done <- struct{}{}
				}
				go pipe(up, c)
				go pipe(c, up)
				<-done
				c.Close()
				up.Close()
			}()
		}
	}()
}
