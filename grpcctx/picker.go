package grpcctx

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/policy"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// picker runs the chain with the RPC's context and the LoadBalancer's
// policy over the READY connections of the chosen candidates; Pick does
// not block and, on the common path, does not allocate. The kind a call's
// rules decided was written on the call by the client interceptors, so the
// picker reads the same decision.
//
// An instance whose connection failed (TRANSIENT_FAILURE, and not READY
// since: a refused or reset connect, a failed handshake) serves nobody: the
// picker routes as if it were not listed, as an ejected instance is not.
// So a gray RPC whose gray instances have all failed falls back to prod's
// READY connections at once (the gray rule's fall-back), instead of
// failing or waiting for an instance that refuses connections; a prod RPC
// never goes to gray.
//
// A connection being made (for the first time, or again after the
// instance closed it: a GOAWAY, MaxConnectionAge, a restart) is not
// failed: its RPCs wait for it, as grpc-go queues RPCs while CONNECTING,
// and stay on their kind. An instance killed abruptly closes its
// connection and refuses the next one within a round trip, so it fails
// then; one that stops answering without closing (a host that vanished,
// no RST) keeps RPCs waiting until the connect timeout
// (grpc.WithConnectParams' MinConnectTimeout, 20 s by default) or the
// RPC's deadline. With outlier detection an RPC whose deadline ends that
// wait counts against the instances it waited for (see waits), so such an
// instance is ejected and a gray RPC then falls back to prod.
//
// An RPC whose deadline passed before the server sent anything (a
// DeadlineExceeded status grpc-go made, DoneInfo.BytesReceived false)
// counts against the instance, with the time waited as its latency; a
// DeadlineExceeded status the server sent is an answer.
//
// When the request's kind has no instance left that has not failed,
// grpc-go's convention applies: while a candidate is connecting the RPC
// queues; when every one has failed it fails at once with Unavailable and
// the last connection error (grpc-go queues it instead when it is
// wait-for-ready).
//
// An RPC picked onto a connection that turns out to be closed is not lost:
// grpc-go waits for the next picker, or retries it transparently when its
// stream could not be started, so it follows the rules above. An RPC
// already sent on a connection that then breaks fails with Unavailable
// (grpc-go cannot know whether the instance acted on it): a retryPolicy
// for UNAVAILABLE in the service config sends idempotent methods again,
// each try picking anew.
//
// When the LoadBalancer keeps Stats, the result's Done reports the RPC's
// outcome for the instance: with outlier detection alone it is made once
// per connection (no allocation per pick); with a latency-aware policy
// (policy.P2C) it also carries the call's start, in an object taken from
// a pool and returned by Done (see timedDone): no allocation per pick
// either.
type picker struct {
	router   atomic.Pointer[adapter.Router] // over the instances whose connection has not failed
	all      atomic.Pointer[adapter.Router] // over every instance; router itself when none has failed
	service  string
	failures failureSet
	waits    *waits // RPCs queued for connections being made
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.router.Load().Route(info.Ctx, handler{})
	if err == nil {
		rp, _ := rt.Picker().(*readyPicker)
		if j, ok := rp.nextReady(); ok {
			// p.result, written out: the common path makes no call more.
			res := balancer.PickResult{SubConn: rp.scs[j]}
			switch {
			case rp.timed:
				res.Done = newTimedDone(p, rt.Call(rp.idx[j]))
			case rp.dones != nil:
				res.Done = rp.dones[j]
			}
			return res, nil
		}
		if rp != nil && rp.connecting {
			p.waits.add(info.Ctx, rp.waiting)
			return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
		}
	}
	return p.pickFailed(info)
}

// pickFailed picks for an RPC whose kind has no instance left whose
// connection has not failed: among every instance, as grpc-go's
// convention has it (see picker).
func (p *picker) pickFailed(info balancer.PickInfo) (balancer.PickResult, error) {
	rt, err := p.all.Load().Route(info.Ctx, handler{})
	if err != nil {
		// The request's kind has no instance at all.
		return balancer.PickResult{}, status.Error(codes.Unavailable, err.Error())
	}
	rp, _ := rt.Picker().(*readyPicker)
	if j, ok := rp.nextReady(); ok {
		return p.result(rt, rp, j), nil
	}
	if rp == nil || rp.connecting {
		if rp != nil {
			p.waits.add(info.Ctx, rp.waiting)
		}
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	// Not a status error: grpc-go fails a non-wait-for-ready RPC with
	// Unavailable and this message, and queues a wait-for-ready one.
	return balancer.PickResult{}, fmt.Errorf("grpcctx: no connection to the %s instances of %q: %w", rt.Kind, p.service, rp.lastErr)
}

// result is the pick of READY connection j of rp, a leaf of rt.
func (p *picker) result(rt adapter.Route, rp *readyPicker, j int) balancer.PickResult {
	res := balancer.PickResult{SubConn: rp.scs[j]}
	switch {
	case rp.timed:
		res.Done = newTimedDone(p, rt.Call(rp.idx[j]))
	case rp.dones != nil:
		res.Done = rp.dones[j]
	}
	return res
}

// timedDone is the Done of one RPC picked by a latency-aware policy: it
// carries the RPC's Call (its start, for the latency). grpc-go calls a
// pick's Done at most once (when the attempt finishes, or at once when
// the picked connection turned out not to be ready), so once it has run
// the object serves another pick: a pool of them keeps the pick from
// allocating. One whose Done never runs is left to the collector.
type timedDone struct {
	p    *picker
	call adapter.Call
	fn   func(balancer.DoneInfo) // t.done, made once per object
}

var timedDones sync.Pool // of *timedDone

func init() {
	timedDones.New = func() any {
		t := &timedDone{}
		t.fn = t.done
		return t
	}
}

// newTimedDone returns the Done of an RPC picked as call.
func newTimedDone(p *picker, call adapter.Call) func(balancer.DoneInfo) {
	t := timedDones.Get().(*timedDone)
	t.p, t.call = p, call
	return t.fn
}

func (t *timedDone) done(di balancer.DoneInfo) {
	p, call := t.p, t.call
	t.p, t.call = nil, adapter.Call{}
	timedDones.Put(t)
	p.done(call, di)
}

// done reports one RPC's result.
func (p *picker) done(call adapter.Call, di balancer.DoneInfo) {
	switch {
	case status.Code(di.Err) == codes.Canceled:
		call.Discard()
	case status.Code(di.Err) == codes.DeadlineExceeded && !p.failures.failed(di.Err):
		// An answer as far as the instance goes when the server sent
		// something (a status of its own, headers); else the deadline ended
		// a call it never answered: a failure of the instance. Either way a
		// failure for its caller.
		call.TimedOut(di.BytesReceived)
	default:
		call.Done(!p.failures.failed(di.Err))
	}
}

// unanswered reports whether di is a DeadlineExceeded the server never
// produced: the RPC's deadline passed before any byte of an answer came
// (grpc-go sets DoneInfo.BytesReceived once a HEADERS frame of the stream
// arrives, so a status the server sent, even DeadlineExceeded, sets it).
func unanswered(di balancer.DoneInfo) bool {
	return status.Code(di.Err) == codes.DeadlineExceeded && !di.BytesReceived
}

// errPicker fails every RPC with err.
type errPicker struct{ err error }

func (p errPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, p.err
}

// readyPolicy builds, for each leaf of the routing tree, the
// LoadBalancer's own policy (round robin, weighted, random) over the
// leaf's instances that have a READY connection, and notes whether the
// others are still connecting or have failed.
type readyPolicy struct {
	b     *graylbBalancer
	inner policy.Policy
}

func (p readyPolicy) NewPicker(list []graylb.Instance) policy.Picker {
	return p.NewStatsPicker(list, nil)
}

// NewStatsPicker is NewPicker over instances whose Stats the LoadBalancer
// keeps: the picker reports each RPC's result to them, and a latency-aware
// inner policy reads them.
func (p readyPolicy) NewStatsPicker(list []graylb.Instance, stats []*policy.Stats) policy.Picker {
	rp := &readyPicker{}
	var readyList []graylb.Instance
	var readyStats []*policy.Stats
	for i, in := range list {
		c := p.b.conns[in.Addr()]
		switch {
		case c == nil:
		case c.state == connectivity.Ready:
			rp.idx = append(rp.idx, i)
			rp.scs = append(rp.scs, c.sc)
			readyList = append(readyList, in)
			if stats != nil {
				readyStats = append(readyStats, stats[i])
			}
		case c.state == connectivity.TransientFailure || c.failing:
			if c.err != nil {
				rp.lastErr = c.err
			}
		default:
			rp.connecting = true
			rp.waiting = append(rp.waiting, in)
		}
	}
	sp, timed := p.inner.(policy.StatsPolicy)
	switch {
	case len(readyList) == 0:
	case stats != nil && timed:
		rp.inner = sp.NewStatsPicker(readyList, readyStats)
		rp.timed = true
	case p.b.src.ab.CallObserved():
		// The LoadBalancer's CallObserver is told of every RPC, timed
		// (one closure per RPC, as with a latency-aware policy).
		rp.inner = p.inner.NewPicker(readyList)
		rp.timed = true
	default:
		rp.inner = p.inner.NewPicker(readyList)
		if stats != nil {
			failures := p.b.failures
			rp.dones = make([]func(balancer.DoneInfo), len(readyStats))
			for j, st := range readyStats {
				rp.dones[j] = func(di balancer.DoneInfo) {
					if status.Code(di.Err) != codes.Canceled {
						st.Report(!failures.failed(di.Err) && !unanswered(di), 0)
					}
				}
			}
		}
	}
	if rp.lastErr == nil {
		rp.lastErr = errors.New("connection failed")
	}
	return rp
}

// readyPicker picks among a leaf's READY connections.
type readyPicker struct {
	idx        []int // leaf index of each READY instance
	scs        []balancer.SubConn
	inner      policy.Picker             // over the READY instances
	connecting bool                      // a candidate without a READY connection is still connecting
	waiting    []graylb.Instance         // those candidates
	lastErr    error                     // else the last connection error among them
	timed      bool                      // results carry the call's start (a latency-aware policy, a CallObserver)
	dones      []func(balancer.DoneInfo) // per READY connection, when results are reported untimed
}

func (p *readyPicker) Next() int {
	if p.inner == nil {
		return 0
	}
	return p.idx[p.inner.Next()]
}

// nextReady returns the index of a READY connection, false when there is
// none.
func (p *readyPicker) nextReady() (int, bool) {
	if p == nil || p.inner == nil {
		return 0, false
	}
	return p.inner.Next(), true
}
