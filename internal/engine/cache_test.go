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

// fakeSource is a Supplier whose pushes and query answers the test controls.
type fakeSource struct {
	mu      sync.Mutex
	list    []Instance
	err     error
	watches map[int]func([]Instance)
	next    int
	queries int
}

func (f *fakeSource) Instances(ctx context.Context, service string) ([]Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
	return f.list, f.err
}

func (f *fakeSource) Watch(service string, fn func([]Instance)) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watches == nil {
		f.watches = map[int]func([]Instance){}
	}
	id := f.next
	f.next++
	f.watches[id] = fn
	return func() { f.mu.Lock(); delete(f.watches, id); f.mu.Unlock() }, nil
}

func (f *fakeSource) push(list []Instance) {
	f.mu.Lock()
	f.list = list
	ws := make([]func([]Instance), 0, len(f.watches))
	for _, w := range f.watches {
		ws = append(ws, w)
	}
	f.mu.Unlock()
	for _, w := range ws {
		w(list)
	}
}

// pushThenAnswer pushes push to the watchers while a query answers answer
// from then on.
func (f *fakeSource) pushThenAnswer(push, answer []Instance) {
	f.mu.Lock()
	f.list = answer
	ws := make([]func([]Instance), 0, len(f.watches))
	for _, w := range f.watches {
		ws = append(ws, w)
	}
	f.mu.Unlock()
	for _, w := range ws {
		w(push)
	}
}

func (f *fakeSource) queryCount() int { f.mu.Lock(); defer f.mu.Unlock(); return f.queries }

func (f *fakeSource) watchCount() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.watches) }

func TestCache_EmptyProtectionRefusesThenAcceptsAfterGrace(t *testing.T) {
	src := &fakeSource{list: []Instance{inst("svc", 1)}}
	c, err := NewCache(src, WithEmptyGrace(500*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	got, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	require.Len(t, got, 1)

	src.push(nil)
	got, _ = c.Instances(context.Background(), "svc")
	assert.Len(t, got, 1, "empty push refused")
	assert.EqualValues(t, 1, c.Stats().RefusedEmpty)
	require.Eventually(t, func() bool {
		got, _ := c.Instances(context.Background(), "svc")
		return len(got) == 0
	}, 5*time.Second, 5*time.Millisecond, "still empty after the grace period: accepted (no stale forever)")
}

// A list that comes back before the grace period ends stops its re-query:
// nothing happens when the grace period would have ended.
func TestCache_EmptyProtectionRecoveredBeforeGrace(t *testing.T) {
	src := &fakeSource{list: []Instance{inst("svc", 1)}}
	c, _ := NewCache(src, WithEmptyGrace(time.Hour))
	defer c.Close()
	_, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	src.push(nil)
	recheck := func() *time.Timer {
		c.mu.Lock()
		e := c.entries["svc"]
		c.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.recheck
	}
	timer := recheck()
	require.NotNil(t, timer, "an empty push refused without a re-query")
	src.push([]Instance{inst("svc", 2)})
	assert.Nil(t, recheck(), "the list came back: the re-query is still due")
	assert.False(t, timer.Stop(), "the list came back: the re-query's timer still runs")
	got, _ := c.Instances(context.Background(), "svc")
	require.Len(t, got, 1)
	assert.Equal(t, 2, got[0].Port)
}

func TestCache_EmptyProtectionQueryFailsKeepsLastGood(t *testing.T) {
	src := &fakeSource{list: []Instance{inst("svc", 1)}}
	c, _ := NewCache(src, WithEmptyGrace(10*time.Millisecond))
	defer c.Close()
	_, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	src.mu.Lock()
	src.err = errors.New("registry down")
	src.mu.Unlock()
	src.mu.Lock()
	before := src.queries
	src.mu.Unlock()
	src.push(nil)
	// Wait for the re-query the grace period ends with.
	require.Eventually(t, func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.queries > before }, 5*time.Second, time.Millisecond)
	got, _ := c.Instances(context.Background(), "svc")
	assert.Len(t, got, 1, "a failed re-query keeps the last good list")
}

func TestCache_WithoutProtection(t *testing.T) {
	src := &fakeSource{list: []Instance{inst("svc", 1)}}
	c, _ := NewCache(src, WithEmptyProtection(false))
	defer c.Close()
	_, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	src.push(nil)
	got, _ := c.Instances(context.Background(), "svc")
	assert.Empty(t, got)
}

func TestCache_KeepsOnlyUsable(t *testing.T) {
	sick, off, zero := inst("svc", 2), inst("svc", 3), inst("svc", 4)
	sick.Healthy, off.Enabled, zero.Weight = false, false, 0
	src := &fakeSource{list: []Instance{inst("svc", 1), sick, off, zero}}
	c, _ := NewCache(src)
	defer c.Close()
	got, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1"}, addrs(got))
}

func TestCache_OneSubscriptionFannedOut(t *testing.T) {
	src := &fakeSource{list: []Instance{inst("svc", 1)}}
	c, _ := NewCache(src)
	var a, b [][]Instance
	stopA, err := c.Watch("svc", func(l []Instance) { a = append(a, l) })
	require.NoError(t, err)
	_, err = c.Watch("svc", func(l []Instance) { b = append(b, l) })
	require.NoError(t, err)
	assert.Equal(t, 1, src.watchCount(), "one subscription per service")
	stopA()
	src.push([]Instance{inst("svc", 2)})
	assert.Empty(t, a)
	assert.Len(t, b, 1, "stopping one watcher leaves the other (nacos-sdk-go #835)")
	require.NoError(t, c.Close())
	assert.Equal(t, 0, src.watchCount(), "Close unsubscribes")
	_, err = c.Instances(context.Background(), "svc")
	assert.ErrorIs(t, err, ErrClosed)
}

func TestCache_SeedFailureIsRetried(t *testing.T) {
	src := &fakeSource{err: errors.New("down")}
	c, _ := NewCache(src, WithSeedRetry(0))
	defer c.Close()
	_, err := c.Instances(context.Background(), "svc")
	require.Error(t, err)
	assert.Equal(t, 0, src.watchCount(), "failed seed leaves no subscription")
	src.mu.Lock()
	src.err, src.list = nil, []Instance{inst("svc", 1)}
	src.mu.Unlock()
	got, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	assert.Len(t, got, 1)
}

func TestRegistry_BadInput(t *testing.T) {
	r := NewRegistry()
	assert.ErrorIs(t, r.Register(Instance{}), ErrInvalidService)
	assert.ErrorIs(t, r.Register(Instance{Service: "s"}), ErrInvalidInstance)
	assert.ErrorIs(t, r.Register(Instance{Service: "s", Host: "h", Port: 70000}), ErrInvalidInstance)
	bad := inst("s", 1)
	bad.Weight = -1
	assert.ErrorIs(t, r.Register(bad), ErrInvalidInstance)
	assert.ErrorIs(t, r.Deregister("s", "h:1"), ErrUnknownService)
	require.NoError(t, r.Register(inst("s", 1)))
	assert.ErrorIs(t, r.Deregister("s", "h:1"), ErrInvalidInstance)
	assert.Error(t, r.Update("s", "127.0.0.1:1", nil))
	assert.ErrorIs(t, r.Update("s", "127.0.0.1:1", func(i *Instance) { i.Weight = -2 }), ErrInvalidInstance)
	_, err := r.Watch("", func([]Instance) {})
	assert.ErrorIs(t, err, ErrInvalidService)
	_, err = r.Watch("s", nil)
	assert.Error(t, err)
	md := map[string]string{"gray": "true"}
	require.NoError(t, r.Register(NewInstance("s", "127.0.0.1", 2, md)))
	md["gray"] = "false"
	got, _ := r.Instances(context.Background(), "s")
	assert.Equal(t, "true", got[1].Metadata["gray"], "registry copied the metadata")
}

func TestCache_HoldsSuddenLossOfAllProd(t *testing.T) {
	p1, p2, g1 := inst("svc", 1), inst("svc", 2), inst("svc", 3, "gray", "true")
	src := &fakeSource{list: []Instance{p1, p2, g1}}
	lb, err := New(src, WithContextHandler(testHandler), WithCacheOptions(WithShrinkProtection(0, 500*time.Millisecond)))
	require.NoError(t, err)
	defer lb.Close()
	prod := context.Background()
	_, err = lb.Pick(prod, "svc")
	require.NoError(t, err)

	// After a registry restart the gray client registered again first.
	src.push([]Instance{g1})
	in, err := lb.Pick(prod, "svc")
	require.NoError(t, err, "the list without any prod instance is held")
	assert.NotEqual(t, 3, in.Port)
	assert.EqualValues(t, 1, lb.cache.Stats().HeldShrinks)
	// A prod instance is back: applied at once.
	src.push([]Instance{g1, p2})
	got, err := pickedSet(t, lb, prod, "svc", 4)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:2"}, got)

	// Held lists are applied when the settle period ends.
	src.push([]Instance{g1})
	require.Eventually(t, func() bool {
		_, err := lb.Pick(prod, "svc")
		return errors.Is(err, ErrNoInstance)
	}, 5*time.Second, 10*time.Millisecond)
}

func TestCache_DoesNotHoldOrdinaryChanges(t *testing.T) {
	p1, g1 := inst("svc", 1), inst("svc", 3, "gray", "true")
	src := &fakeSource{list: []Instance{p1, g1}}
	lb, err := New(src, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	g := withHeaders(context.Background(), "gray", "true")
	_, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	src.push([]Instance{p1}) // the last gray instance leaves: gray falls back at once
	in, err := lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 1, in.Port)
	flipped := inst("svc", 1, "gray", "true") // the last prod flips to gray: applied at once
	src.push([]Instance{flipped})
	_, err = lb.Pick(context.Background(), "svc")
	require.ErrorIs(t, err, ErrNoInstance)
	assert.Zero(t, lb.cache.Stats().HeldShrinks)
}

// The last prod instance flips to gray and the registry now writes its
// address another way (::ffff:127.0.0.1 for 127.0.0.1): the same machine
// changed kind, applied at once; holding it as a vanished prod instance
// would send prod to a gray machine for the settle period.
func TestCache_FlipUnderAnotherSpellingIsNoShrink(t *testing.T) {
	p1 := inst("svc", 1)
	src := &fakeSource{list: []Instance{p1}}
	lb, err := New(src, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	_, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	src.push([]Instance{NewInstance("svc", "::ffff:127.0.0.1", 1, map[string]string{"gray": "true"})})
	_, err = lb.Pick(context.Background(), "svc")
	require.ErrorIs(t, err, ErrNoInstance, "prod reached the machine that turned gray")
	assert.Zero(t, lb.cache.Stats().HeldShrinks)
}

func TestCache_ShrinkProtectionByShare(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2), inst("svc", 3), inst("svc", 4)}
	src := &fakeSource{list: list}
	c, _ := NewCache(src, WithShrinkProtection(0.5, time.Hour))
	defer c.Close()
	_, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	src.push(list[:1])
	got, _ := c.Instances(context.Background(), "svc")
	assert.Len(t, got, 4, "keeping 1 of 4 is held")
	src.push(list[:2])
	got, _ = c.Instances(context.Background(), "svc")
	assert.Len(t, got, 2, "keeping half is applied")
}

// refillSource is a fakeSource that reports registry refills.
type refillSource struct {
	fakeSource
	mu    sync.Mutex
	until time.Time
}

func (r *refillSource) RefillUntil() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.until }

func (r *refillSource) refillFor(d time.Duration) {
	r.mu.Lock()
	r.until = time.Now().Add(d)
	r.mu.Unlock()
}

// A registry restart: the first pushes after it hold the prod instances
// before the gray one has registered again. Gray stays gray while the
// registry refills; the list is applied once the gray instance is back.
func TestCache_RefillHoldsVanishedGray(t *testing.T) {
	p1, p2, g1 := inst("svc", 1), inst("svc", 2), inst("svc", 3, "gray", "true")
	src := &refillSource{}
	src.list = []Instance{p1, p2, g1}
	lb, err := New(src, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	gray := withHeaders(context.Background(), "gray", "true")
	_, err = lb.Pick(gray, "svc")
	require.NoError(t, err)

	src.refillFor(time.Hour)
	src.push([]Instance{p1})     // prod-2 and gray-1 not yet back
	src.push([]Instance{p1, p2}) // every gray instance still missing
	for i := 0; i < 10; i++ {
		in, err := lb.Pick(gray, "svc")
		require.NoError(t, err)
		assert.Equal(t, 3, in.Port, "gray requests stay on gray while the registry refills")
	}
	assert.EqualValues(t, 2, lb.cache.Stats().HeldShrinks)
	src.push([]Instance{g1}) // every prod instance missing: held as well
	in, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	assert.NotEqual(t, 3, in.Port)

	src.push([]Instance{p1, p2, g1}) // refilled: applied at once
	assert.EqualValues(t, 3, lb.cache.Stats().HeldShrinks)
	in, err = lb.Pick(gray, "svc")
	require.NoError(t, err)
	assert.Equal(t, 3, in.Port)
}

// A registry restart whose first list is empty: the empty update is
// refused, and the re-query at the end of the grace period finds the prod
// instance registered again but not yet the gray one. While the registry
// refills, that list is a sudden shrink like any other: held, so gray
// requests stay on gray; the list with the gray instance back is applied.
func TestCache_RefillHoldsWhatTheEmptyRecheckFinds(t *testing.T) {
	p1, g1 := inst("svc", 1), inst("svc", 3, "gray", "true")
	src := &refillSource{}
	src.list = []Instance{p1, g1}
	lb, err := New(src, WithContextHandler(testHandler), WithCacheOptions(WithEmptyGrace(10*time.Millisecond)))
	require.NoError(t, err)
	defer lb.Close()
	gray := withHeaders(context.Background(), "gray", "true")
	_, err = lb.Pick(gray, "svc")
	require.NoError(t, err)

	src.refillFor(time.Hour)
	before := src.queryCount()
	src.pushThenAnswer(nil, []Instance{p1}) // pushed: nothing yet; the re-query: prod back
	require.Eventually(t, func() bool { return src.queryCount() > before },
		5*time.Second, time.Millisecond, "the re-query at the end of the grace period")
	require.Eventually(t, func() bool { return lb.cache.Stats().HeldShrinks > 0 || lb.cache.Stats().Applied > 1 },
		5*time.Second, time.Millisecond, "the re-queried list held or applied")
	for i := 0; i < 10; i++ {
		in, err := lb.Pick(gray, "svc")
		require.NoError(t, err)
		require.Equal(t, 3, in.Port, "gray requests stay on gray while the registry refills")
	}
	assert.EqualValues(t, 1, lb.cache.Stats().HeldShrinks)

	src.push([]Instance{p1, g1}) // the gray instance is back
	in, err := lb.Pick(gray, "svc")
	require.NoError(t, err)
	assert.Equal(t, 3, in.Port)
	in, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	assert.Equal(t, 1, in.Port)
}

// While the registry refills, a re-query that still finds the service
// empty is refused like the update before it, and asked again after
// another grace period; once the registry has settled the empty list is
// accepted (a service that really went to zero does not stay stale).
func TestCache_RefillRefusesAnEmptyRecheck(t *testing.T) {
	p1 := inst("svc", 1)
	src := &refillSource{}
	src.list = []Instance{p1}
	c, err := NewCache(src, WithEmptyGrace(10*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	src.refillFor(time.Hour)
	before := src.queryCount()
	src.push(nil)
	require.Eventually(t, func() bool { return src.queryCount() >= before+2 }, 5*time.Second, time.Millisecond,
		"asked again after each grace period while the registry refills")
	got, _ := c.Instances(context.Background(), "svc")
	assert.Len(t, got, 1, "the last good list serves while the registry refills")
	assert.GreaterOrEqual(t, c.Stats().RefusedEmpty, uint64(2))

	src.refillFor(-time.Second) // settled
	require.Eventually(t, func() bool {
		got, _ := c.Instances(context.Background(), "svc")
		return len(got) == 0
	}, 5*time.Second, time.Millisecond, "still empty once settled: accepted")
}

// Outside a refill window a deliberate deregistration of every prod (or
// every gray) instance applies at the next update.
func TestCache_DeliberateDeregistrationAppliesAtOnce(t *testing.T) {
	p1, p2, g1 := inst("svc", 1), inst("svc", 2), inst("svc", 3, "gray", "true")
	src := &refillSource{}
	src.list = []Instance{p1, p2, g1}
	lb, err := New(src, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	_, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	src.push([]Instance{g1})
	_, err = lb.Pick(context.Background(), "svc")
	require.ErrorIs(t, err, ErrNoInstance, "every prod instance deregistered: prod fails at once")
	src.push([]Instance{p1, p2, g1})
	src.push([]Instance{p1, p2})
	in, err := lb.Pick(withHeaders(context.Background(), "gray", "true"), "svc")
	require.NoError(t, err)
	assert.NotEqual(t, 3, in.Port, "every gray instance deregistered: gray falls back at once")
	assert.Zero(t, lb.cache.Stats().HeldShrinks)
}

// A held list is applied when the refill window ends.
func TestCache_RefillHoldEndsWithTheWindow(t *testing.T) {
	p1, g1 := inst("svc", 1), inst("svc", 3, "gray", "true")
	src := &refillSource{}
	src.list = []Instance{p1, g1}
	c, err := NewCache(src, WithPartition(func(in Instance) string {
		if in.Metadata["gray"] == "true" {
			return ""
		}
		return "prod"
	}))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	src.refillFor(300 * time.Millisecond)
	start := time.Now()
	src.push([]Instance{p1})
	got, _ := c.Instances(context.Background(), "svc")
	require.Len(t, got, 2, "held while refilling")
	require.Eventually(t, func() bool {
		got, _ := c.Instances(context.Background(), "svc")
		return len(got) == 1
	}, 5*time.Second, 5*time.Millisecond)
	assert.Less(t, time.Since(start), 3*time.Second, "applied at the end of the window, not after DefaultSettle")
}

// countingSource fails every query and counts them.
type countingSource struct {
	fakeSource
	mu sync.Mutex
	n  map[string]int
}

func (s *countingSource) Instances(ctx context.Context, service string) ([]Instance, error) {
	s.mu.Lock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[service]++
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.fakeSource.Instances(ctx, service)
}

func (s *countingSource) count(service string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[service]
}

// With the registry unreachable, a service that has no list fails fast
// after the first failure, with its cause, and recovers on its own.
func TestCache_FailedSeedFailsFastThenRecovers(t *testing.T) {
	src := &countingSource{}
	src.err = errors.New("registry unreachable")
	c, err := NewCache(src, WithSeedRetry(200*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 50; i++ {
		_, err := c.Instances(context.Background(), "svc")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "registry unreachable", "the cause is named")
	}
	assert.Equal(t, 1, src.count("svc"), "the source is asked once per retry period")
	src.fakeSource.mu.Lock()
	src.err, src.list = nil, []Instance{inst("svc", 1)}
	src.fakeSource.mu.Unlock()
	require.Eventually(t, func() bool {
		got, err := c.Instances(context.Background(), "svc")
		return err == nil && len(got) == 1
	}, 5*time.Second, 10*time.Millisecond, "recovers on its own")
}

// The remembered failures stay bounded whatever names callers send.
func TestCache_FailedSeedsBounded(t *testing.T) {
	src := &countingSource{}
	src.err = ErrUnknownService
	c, err := NewCache(src, WithSeedRetry(time.Hour))
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 3*maxSeedFailures; i++ {
		_, err := c.Instances(context.Background(), fmt.Sprintf("unknown-%d", i))
		require.ErrorIs(t, err, ErrUnknownService)
	}
	c.mu.Lock()
	n, entries := len(c.failed), len(c.entries)
	c.mu.Unlock()
	assert.LessOrEqual(t, n, maxSeedFailures)
	assert.Zero(t, entries)
}

// A caller's own deadline is not remembered as the source's failure.
func TestCache_CallerDeadlineNotRemembered(t *testing.T) {
	src := &countingSource{}
	src.list = []Instance{inst("svc", 1)}
	c, _ := NewCache(src)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = c.Instances(ctx, "svc")
	got, err := c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	assert.Len(t, got, 1)
}

// TestCache_ReadyEntryWinsOverADoneContext: a service whose list is cached
// answers from it whatever the caller's context says; waiting is what a
// done context cuts short, not reading. (A select over "ready" and
// "context done", both ready, answered ctx.Err() about half the time.)
func TestCache_ReadyEntryWinsOverADoneContext(t *testing.T) {
	src := &fakeSource{list: []Instance{inst("svc", 1)}}
	c, err := NewCache(src)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Instances(context.Background(), "svc")
	require.NoError(t, err)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	failed := 0
	for i := 0; i < 1000; i++ {
		if got, err := c.Instances(done, "svc"); err != nil || len(got) != 1 {
			failed++
		}
	}
	assert.Zero(t, failed, "of 1000 reads of a cached list with a done context")
}

// A name the source answers with an empty list (as Nacos answers a name
// nothing was registered under) keeps nothing once its last watcher
// leaves: no entry, no subscription to the source.
func TestCache_LastWatcherOfAnEmptyNameForgetsIt(t *testing.T) {
	src := &fakeSource{} // every name: an empty list
	c, err := NewCache(src)
	require.NoError(t, err)
	defer c.Close()
	entries := func() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.entries) }
	for i := 0; i < 1000; i++ {
		stop, err := c.Watch(fmt.Sprintf("name-%d", i), func([]Instance) {})
		require.NoError(t, err)
		stop()
	}
	assert.Zero(t, src.watchCount(), "subscriptions to the source left")
	assert.Zero(t, entries(), "entries left")

	// Two watchers: the subscription stays until the last leaves.
	stop1, err := c.Watch("twice", func([]Instance) {})
	require.NoError(t, err)
	stop2, err := c.Watch("twice", func([]Instance) {})
	require.NoError(t, err)
	stop1()
	assert.Equal(t, 1, src.watchCount())
	stop2()
	assert.Zero(t, src.watchCount())
	assert.Zero(t, entries())

	// A watched name that gets instances is a known service: kept.
	stop3, err := c.Watch("svc", func([]Instance) {})
	require.NoError(t, err)
	src.push([]Instance{inst("svc", 1)})
	stop3()
	assert.Equal(t, 1, src.watchCount())
	assert.Equal(t, 1, entries())
}

// A watcher may stop itself from its own callback, as one does that stops
// once the service has no instance left: the stop returns, and when it was
// the last watcher of a name now empty the name is forgotten as any other
// (no entry, no subscription to the source) by the time the update that
// emptied it has been delivered. With empty protection off the update is
// the source's push; with it on, the re-query after the grace period.
func TestCache_WatcherStopsItselfFromItsCallback(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []CacheOption
		// sync: the source's push delivers the empty list, and the name
		// is let go of before the push returns; else a timer's goroutine
		// delivers it, and the test polls.
		sync bool
	}{
		{"protection off", []CacheOption{WithEmptyProtection(false)}, true},
		{"protection on, after the grace", []CacheOption{WithEmptyGrace(time.Millisecond)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := NewRegistry()
			require.NoError(t, reg.Register(inst("svc", 1)))
			c, err := NewCache(reg, tc.opts...)
			require.NoError(t, err)
			defer c.Close()
			var stop func()
			emptied := make(chan struct{})
			delivered := make(chan struct{}) // the delivery of the empty list ended
			stop, err = c.Watch("svc", func(l []Instance) {
				if len(l) == 0 {
					close(emptied)
					stop()
					close(delivered)
				}
			})
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- reg.Deregister("svc", inst("svc", 1).Addr()) }()
			for _, w := range []struct {
				ch   <-chan struct{}
				what string
			}{{emptied, "the empty list is delivered"}, {delivered, "the watcher's stop, called from its callback, returns"}} {
				select {
				case <-w.ch:
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: not within 5s", w.what)
				}
			}
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("Deregister did not return within 5s")
			}
			left := func() (entries, watchers int) {
				c.mu.Lock()
				entries = len(c.entries)
				c.mu.Unlock()
				reg.mu.Lock()
				watchers = reg.services["svc"].watchers.Len()
				reg.mu.Unlock()
				return entries, watchers
			}
			if !tc.sync {
				require.Eventually(t, func() bool { e, w := left(); return e == 0 && w == 0 }, 5*time.Second, time.Millisecond,
					"the name is let go of after the delivery")
			}
			entries, watchers := left()
			assert.Zero(t, entries, "cache entries left")
			assert.Zero(t, watchers, "subscriptions to the source left")
			stop() // a second call is harmless
		})
	}
}

// A stop called on another goroutine while the Cache delivers an update
// does not wait for the delivery; the delivery lets go of the forgotten
// name before the source's push returns.
func TestCache_StopDuringADeliveryLetsGoAsItEnds(t *testing.T) {
	src := &fakeSource{list: []Instance{inst("svc", 1)}}
	c, err := NewCache(src, WithEmptyProtection(false))
	require.NoError(t, err)
	defer c.Close()
	entered, resume := make(chan struct{}), make(chan struct{})
	stop, err := c.Watch("svc", func(l []Instance) {
		if len(l) == 0 {
			close(entered)
			<-resume
		}
	})
	require.NoError(t, err)
	pushed := make(chan struct{})
	go func() { src.push(nil); close(pushed) }()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not within 5s", what)
		}
	}
	wait(entered, "the empty list is delivered")
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	wait(stopped, "the stop returns while the delivery runs")
	assert.Equal(t, 1, src.watchCount(), "the subscription is let go of when the delivery ends, not before")
	close(resume)
	wait(pushed, "the push returns")
	assert.Zero(t, src.watchCount(), "subscriptions to the source left")
	c.mu.Lock()
	assert.Zero(t, len(c.entries), "cache entries left")
	c.mu.Unlock()
}
