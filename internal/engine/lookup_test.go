package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stalledSupplier is a Registry whose Instances, for the services stalled
// says, blocks until released, ignoring its ctx (as a call to a server
// that stopped answering does while the client waits on its own timeout).
// entered receives the name of each service whose call blocked.
type stalledSupplier struct {
	*Registry
	stalled func(service string) bool
	entered chan string
	release chan struct{}
	once    sync.Once
}

func newStalledSupplier(t *testing.T, stalled func(string) bool, list ...Instance) *stalledSupplier {
	t.Helper()
	s := &stalledSupplier{Registry: NewRegistry(), stalled: stalled, entered: make(chan string, 64), release: make(chan struct{})}
	for _, in := range list {
		require.NoError(t, s.Register(in))
	}
	t.Cleanup(s.unblock) // a test that failed must not leave its calls blocked
	return s
}

func (s *stalledSupplier) unblock() { s.once.Do(func() { close(s.release) }) }

func (s *stalledSupplier) Instances(ctx context.Context, service string) ([]Instance, error) {
	if s.stalled(service) {
		s.entered <- service
		<-s.release
	}
	return s.Registry.Instances(ctx, service)
}

// waitEntered waits until the supplier's call for service blocked.
func (s *stalledSupplier) waitEntered(t *testing.T, service string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case got := <-s.entered:
			if got == service {
				return
			}
		case <-deadline:
			t.Fatalf("the supplier was never asked for %q", service)
		}
	}
}

type pickResult struct {
	in   Instance
	err  error
	took time.Duration
}

// pickAsync picks on a goroutine of its own and hands over the result.
func pickAsync(lb *LoadBalancer, ctx context.Context, service string) <-chan pickResult {
	ch := make(chan pickResult, 1)
	go func() {
		start := time.Now()
		in, err := lb.Pick(ctx, service)
		ch <- pickResult{in, err, time.Since(start)}
	}()
	return ch
}

// await returns what ch delivers within limit, failing the test otherwise.
func await(t *testing.T, ch <-chan pickResult, limit time.Duration, what string) pickResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: still blocked after %v", what, limit)
		return pickResult{}
	}
}

// A lookup that blocks on the supplier delays no pick of another service.
func TestPick_BlockedLookupDelaysNoOtherService(t *testing.T) {
	sup := newStalledSupplier(t, func(s string) bool { return s == "slow" }, inst("slow", 1), inst("fast", 2))
	lb, err := New(sup)
	require.NoError(t, err)
	defer func() { sup.unblock(); lb.Close() }() // released first: Close may wait on the lookup
	slow := pickAsync(lb, context.Background(), "slow")
	sup.waitEntered(t, "slow")
	r := await(t, pickAsync(lb, context.Background(), "fast"), time.Second, "a first pick of another service")
	require.NoError(t, r.err)
	assert.Equal(t, 2, r.in.Port)
	sup.unblock()
	r = await(t, slow, 5*time.Second, "the pick of the released service")
	require.NoError(t, r.err)
	assert.Equal(t, 1, r.in.Port)
}

// Every pick honours its context's deadline, whatever the supplier does:
// a first pick of a service, while the supplier blocks on another and on
// it too, returns at its deadline with the context's error.
func TestPick_HonoursDeadlineWhileSupplierBlocks(t *testing.T) {
	sup := newStalledSupplier(t, func(string) bool { return true }, inst("a", 1), inst("b", 2))
	lb, err := New(sup)
	require.NoError(t, err)
	defer func() { sup.unblock(); lb.Close() }() // released first: Close may wait on the lookup
	blocked := pickAsync(lb, context.Background(), "a")
	sup.waitEntered(t, "a")
	for _, service := range []string{"b", "a"} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		r := await(t, pickAsync(lb, ctx, service), 2*time.Second, "a pick with a 200 ms deadline of "+service)
		cancel()
		require.ErrorIs(t, r.err, context.DeadlineExceeded, service)
		assert.Less(t, r.took, time.Second, service)
		assert.GreaterOrEqual(t, r.took, 190*time.Millisecond, service)
	}
	sup.unblock()
	r := await(t, blocked, 5*time.Second, "the pick without a deadline once released")
	require.NoError(t, r.err)
}

// Close returns within a second while lookups are blocked on the supplier
// (an owned Cache included), and the picks waiting on them return
// ErrClosed.
func TestClose_ReturnsWhileLookupsBlock(t *testing.T) {
	sup := newStalledSupplier(t, func(string) bool { return true }, inst("a", 1), inst("b", 2))
	lb, err := New(sup)
	require.NoError(t, err)
	pa := pickAsync(lb, context.Background(), "a")
	sup.waitEntered(t, "a")
	pb := pickAsync(lb, context.Background(), "b")
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- lb.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
		assert.Less(t, time.Since(start), time.Second)
	case <-time.After(3 * time.Second):
		t.Fatal("Close still blocked after 3 s")
	}
	for _, ch := range []<-chan pickResult{pa, pb} {
		r := await(t, ch, time.Second, "a pick blocked when Close ran")
		require.ErrorIs(t, r.err, ErrClosed)
	}
	_, err = lb.Pick(context.Background(), "a")
	require.ErrorIs(t, err, ErrClosed)
	sup.unblock() // the lookup ends after Close: nothing is published
	require.Eventually(t, func() bool {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		return len(lb.lookups) == 0
	}, 5*time.Second, 5*time.Millisecond)
	assert.Nil(t, lb.services.Load().get("a"), "a lookup that ended after Close publishes nothing")
}

// Close cancels the context a lookup runs under: a supplier that honours
// its ctx returns at once, with the context's error.
func TestClose_CancelsLookups(t *testing.T) {
	var got error
	entered, left, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) }) // a failed test leaves nothing blocked
	sup := supplierFunc(func(ctx context.Context, service string) ([]Instance, error) {
		close(entered)
		select {
		case <-ctx.Done():
		case <-release:
		}
		got = ctx.Err()
		close(left)
		return nil, ctx.Err()
	})
	lb, err := New(sup)
	require.NoError(t, err)
	p := pickAsync(lb, context.Background(), "a")
	<-entered
	go lb.Close()
	select {
	case <-left:
	case <-time.After(time.Second):
		t.Fatal("the supplier's ctx was not cancelled by Close within 1 s")
	}
	assert.True(t, errors.Is(got, context.Canceled), "the supplier's ctx: %v", got)
	r := await(t, p, time.Second, "the pick")
	assert.ErrorIs(t, r.err, ErrClosed)
}

// supplierFunc is a Supplier whose Instances is a function and whose
// Watch does nothing.
type supplierFunc func(ctx context.Context, service string) ([]Instance, error)

func (f supplierFunc) Instances(ctx context.Context, service string) ([]Instance, error) {
	return f(ctx, service)
}
func (f supplierFunc) Watch(string, func([]Instance)) (func(), error) { return func() {}, nil }

// Memory stays bounded whatever names callers send while the supplier
// hangs: at most maxLookups lookups are in flight; a pick of one more name
// waits for a free one within its ctx.
func TestPick_LookupsInFlightAreBounded(t *testing.T) {
	sup := newStalledSupplier(t, func(string) bool { return true })
	sup.entered = make(chan string, 4*maxLookups) // not waited on here
	lb, err := New(sup)
	require.NoError(t, err)
	defer func() { sup.unblock(); lb.Close() }()
	const names = maxLookups + 100
	results := make(chan pickResult, names)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for i := 0; i < names; i++ {
		go func() {
			_, err := lb.Pick(ctx, fmt.Sprintf("flood-%d", i))
			results <- pickResult{err: err}
		}()
	}
	for i := 0; i < names; i++ {
		r := await(t, results, 5*time.Second, "a pick of a flooding name")
		require.ErrorIs(t, r.err, context.DeadlineExceeded)
	}
	lb.mu.Lock()
	inFlight := len(lb.lookups)
	lb.mu.Unlock()
	assert.LessOrEqual(t, inFlight, maxLookups, "lookups in flight")
}
