package engine

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/graylb/graylb/internal/ring"
)

// UnroutedService is graylb.UnroutedService.
const UnroutedService = "<unrouted>"

// MaxUnroutedRecent is graylb.MaxUnroutedRecent.
const MaxUnroutedRecent = 8

// maxUnroutedError bounds an error text kept in UnroutedState.
const maxUnroutedError = 2 * MaxServiceNameLen

// UnroutedState is graylb.UnroutedState.
type UnroutedState struct {
	// Failed counts those failed picks since New.
	Failed uint64 `json:"failed"`
	// Recent are the last MaxUnroutedRecent names that failed, newest
	// first, each once (a name failing again moves to the front).
	Recent []UnroutedPick `json:"recent"`
}

// UnroutedPick is graylb.UnroutedPick.
type UnroutedPick struct {
	// Service is the name picked, cut to MaxServiceNameLen bytes (then
	// ending in "..."): untrusted text, escape it wherever it is shown.
	Service string    `json:"service"`
	Kind    Kind      `json:"kind"`  // the request's kind
	Error   string    `json:"error"` // the pick's error, cut to 1024 bytes
	At      time.Time `json:"at"`
}

// Unrouted is graylb.LoadBalancer.Unrouted.
func (lb *LoadBalancer) Unrouted() UnroutedState { return lb.unrouted.state() }

// unroutedLog keeps UnroutedState. It is written only when a pick fails:
// the count is an atomic add, the names a short critical section.
type unroutedLog struct {
	failed atomic.Uint64
	mu     sync.Mutex
	recent ring.Ring[UnroutedPick] // made on the first failure
}

func (l *unroutedLog) record(name string, kind Kind, err error) {
	l.failed.Add(1)
	msg := clip(err.Error(), maxUnroutedError)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recent.Cap() == 0 {
		l.recent = ring.New[UnroutedPick](MaxUnroutedRecent)
	}
	i := 0
	for i < l.recent.Len() && l.recent.At(i).Service != name {
		i++
	}
	if i < l.recent.Len() { // listed: moves to the front
		name = l.recent.At(i).Service // the copy made when it was listed
		l.recent.Remove(i)
	} else { // a new entry, the oldest dropped when full
		// A copy, cut: the pick's name may be a slice of a larger buffer.
		name = strings.Clone(clip(name, MaxServiceNameLen))
	}
	l.recent.Push(UnroutedPick{Service: name, Kind: kind, Error: msg, At: now})
}

func (l *unroutedLog) state() UnroutedState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return UnroutedState{Failed: l.failed.Load(), Recent: l.recent.Newest([]UnroutedPick{})}
}

// clip cuts s to at most n bytes at a character boundary, marking the cut
// with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// failedUnrouted is failedUnroutedKind for a request whose kind was not
// decided yet (the pick failed before routing).
func (lb *LoadBalancer) failedUnrouted(ctx context.Context, name string, call ContextHandler, err error) {
	var r Request
	r.init(ctx, name, lb.handlerFor(call), valuesIn(ctx))
	r.call = call
	k, _, _ := lb.gray.decideRequest(&r, lb.rules.Load())
	lb.failedUnroutedKind(name, k, err)
}

// failedUnroutedKind records a failed pick of name, which the LoadBalancer
// does not route, by a request of kind k, and tells the Observer under
// UnroutedService (or under its own name when the Cache follows it: see
// UnroutedService). Only a failed pick comes here.
func (lb *LoadBalancer) failedUnroutedKind(name string, k Kind, err error) {
	if lb.cache.follows(name) {
		if lb.observer != nil {
			lb.observer(name, k, Failed)
		}
		return
	}
	// Matched against names as they were given: a clipped name is listed
	// once per failure, which keeps the list bounded all the same.
	lb.unrouted.record(name, k, err)
	if lb.observer != nil {
		lb.observer(UnroutedService, k, Failed)
	}
}

// follows reports whether the Cache holds a list of service that its
// first query gave (LoadBalancer.Services lists it).
func (c *Cache) follows(service string) bool {
	c.mu.Lock()
	e := c.entries[service]
	c.mu.Unlock()
	return e != nil && c.ready(e)
}
