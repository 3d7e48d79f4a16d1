package nacos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The faults a server can have that leave its clients waiting: "pause"
// SIGSTOPs it (its sockets stay open and take connections; nothing
// answers, as a server stalled in a long GC pause or on a frozen VM), "kill"
// kill -9s it (connections refused). Each test runs under both.
var serverFaults = []string{"pause", "kill"}

// takeServerAway applies fault to the test server and gives it back at
// the end of the test (resumed, or started again).
func takeServerAway(t *testing.T, ctl func(...string), fault string) {
	t.Helper()
	restartServer(t) // runs last: start is a no-op on a server that answers
	switch fault {
	case "pause":
		t.Cleanup(func() { ctl("resume") })
		ctl("pause")
	case "kill":
		ctl("stop", "-9")
	default:
		t.Fatalf("unknown fault %q", fault)
	}
}

// timed runs fn on a goroutine and returns a channel that receives its
// error and how long it took.
func timed(fn func() error) <-chan timedResult {
	ch := make(chan timedResult, 1)
	go func() {
		start := time.Now()
		err := fn()
		ch <- timedResult{err, time.Since(start)}
	}()
	return ch
}

type timedResult struct {
	err  error
	took time.Duration
}

func awaitTimed(t *testing.T, ch <-chan timedResult, limit time.Duration, what string) timedResult {
	t.Helper()
	select {
	case r := <-ch:
		t.Logf("%s: %v after %v", what, r.err, r.took.Round(time.Millisecond))
		return r
	case <-time.After(limit):
		t.Fatalf("%s: still blocked after %v", what, limit)
		return timedResult{}
	}
}

// With the server stalled or dead, a LoadBalancer on the Nacos Supplier
// keeps serving the services it routes; a first pick of another service
// returns by its deadline; LoadBalancer.Close and Supplier.Close each
// return within a second and release the picks blocked on a lookup.
func TestIntegration_StalledServerBlocksNothing(t *testing.T) {
	for _, fault := range serverFaults {
		t.Run(fault, func(t *testing.T) {
			ctl := script(t)
			svc := fmt.Sprintf("it-stall-%s-%d", fault, time.Now().UnixNano()%1e9)
			instance(t, svc, 7601, nil)
			nsup, err := NewSupplier(testOpts(t)...)
			require.NoError(t, err)
			sup := &watchReached{Supplier: nsup, service: svc + "-c", reached: make(chan struct{})}
			lb, err := graylb.New(sup)
			require.NoError(t, err)
			t.Cleanup(func() { lb.Close(); sup.Close() })
			require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{7601}, ports(t, lb, noneCtx, svc, 2)) },
				10*time.Second, 50*time.Millisecond)

			takeServerAway(t, ctl, fault)
			if fault == "kill" {
				require.Eventually(t, func() bool { return !sup.client.healthy() }, 10*time.Second, 20*time.Millisecond, "the Client saw the server go")
			}

			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			in, err := lb.Pick(ctx, svc)
			require.NoError(t, err, "a routed service keeps serving its last list")
			assert.Equal(t, 7601, in.Port)

			// The first pick of a service waits on the server at most until
			// its ctx ends.
			r := awaitTimed(t, timed(func() error { _, err := lb.Pick(ctx, svc+"-b"); return err }), 3*time.Second,
				"a first pick with a 200 ms deadline")
			require.Error(t, r.err)
			assert.Less(t, r.took, time.Second)
			if fault == "pause" {
				assert.ErrorIs(t, r.err, context.DeadlineExceeded)
			}

			// One without a deadline waits until Close.
			blocked := timed(func() error { _, err := lb.Pick(context.Background(), svc+"-c"); return err })
			within(t, sup.reached, 3*time.Second, "the pick without a deadline reaches the Supplier")
			r = awaitTimed(t, timed(lb.Close), 3*time.Second, "LoadBalancer.Close")
			require.NoError(t, r.err)
			assert.Less(t, r.took, time.Second, "LoadBalancer.Close")
			r = awaitTimed(t, blocked, time.Second, "the pick without a deadline")
			require.Error(t, r.err)
			if fault == "pause" {
				assert.ErrorIs(t, r.err, graylb.ErrClosed)
			}
			r = awaitTimed(t, timed(sup.Close), 3*time.Second, "Supplier.Close")
			require.NoError(t, r.err)
			assert.Less(t, r.took, time.Second, "Supplier.Close")
		})
	}
}

// watchReached is a Supplier that closes reached when a LoadBalancer's
// first pick of service reaches it (its Cache watches the service first).
type watchReached struct {
	*Supplier
	service string
	reached chan struct{}
	once    sync.Once
}

func (s *watchReached) Watch(service string, fn func([]graylb.Instance)) (func(), error) {
	if service == s.service {
		s.once.Do(func() { close(s.reached) })
	}
	return s.Supplier.Watch(service, fn)
}

// stallingNaming is a naming client whose queries hang until their ctx
// ends, as queries to a stalled server do; entered is closed at the first.
type stallingNaming struct {
	*fakeNaming
	entered chan struct{}
	once    sync.Once
}

func (f *stallingNaming) query(ctx context.Context, _, _ string, _ []string) ([]model.Instance, error) {
	f.once.Do(func() { close(f.entered) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// Supplier.Close returns at once while a reconciliation's query hangs on
// the server: Close cancels it. (It used to wait for the query's own
// bound, the reconcile period: 15 s by default.)
func TestSupplier_CloseCancelsAReconciliation(t *testing.T) {
	f := &stallingNaming{fakeNaming: &fakeNaming{}, entered: make(chan struct{})}
	s := newSupplier(f, newConfig([]Option{WithReconcile(2 * time.Second)}))
	stop, err := s.Watch("svc", func([]graylb.Instance) {})
	require.NoError(t, err)
	defer stop()
	select {
	case <-f.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no reconciliation within 10 s")
	}
	r := awaitTimed(t, timed(s.Close), 5*time.Second, "Supplier.Close during a reconciliation")
	require.NoError(t, r.err)
	assert.Less(t, r.took, time.Second)
}

// With the server stalled or dead, RuleSource.Load returns when its ctx
// ends (graylb.New bounds the first Load by WithRuleLoadTimeout), and
// Close at once.
func TestIntegration_StalledServerRuleLoad(t *testing.T) {
	for _, fault := range serverFaults {
		t.Run(fault, func(t *testing.T) {
			ctl := script(t)
			rs, err := NewRuleSource(fmt.Sprintf("it-stall-rules-%s-%d", fault, time.Now().UnixNano()%1e9), testOpts(t)...)
			require.NoError(t, err)
			t.Cleanup(func() { rs.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = rs.Load(ctx)
			require.NoError(t, err, "the server answers before the fault")
			takeServerAway(t, ctl, fault)

			short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancelShort()
			r := awaitTimed(t, timed(func() error { _, err := rs.Load(short); return err }), 10*time.Second, "Load with a 200 ms deadline")
			require.Error(t, r.err)
			assert.Less(t, r.took, time.Second)
			r = awaitTimed(t, timed(rs.Close), 5*time.Second, "RuleSource.Close")
			assert.Less(t, r.took, time.Second)
		})
	}
}

// hangingSDKNaming is an SDK naming client whose Subscribe and
// Unsubscribe hang until released, as they do on a stalled server.
type hangingSDKNaming struct {
	naming_client.INamingClient // what the test does not use; nil
	release                     chan struct{}
	unsubscribed                atomic.Int32
}

func (h *hangingSDKNaming) ServerHealthy() bool { return true }
func (h *hangingSDKNaming) Subscribe(*vo.SubscribeParam) error {
	<-h.release
	return nil
}
func (h *hangingSDKNaming) Unsubscribe(*vo.SubscribeParam) error {
	<-h.release
	h.unsubscribed.Add(1)
	return nil
}

// A Supplier on an SDK naming client (WithNamingClient) never waits on the
// SDK's Subscribe or Unsubscribe: Watch, a watcher's stop and Close return
// at once while they hang, and the unsubscription still happens.
func TestSupplier_SDKSubscriptionsDoNotBlock(t *testing.T) {
	h := &hangingSDKNaming{release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	s, err := NewSupplier(WithNamingClient(h))
	require.NoError(t, err)
	r := awaitTimed(t, timed(func() error {
		if _, err := s.Watch("a", func([]graylb.Instance) {}); err != nil {
			return err
		}
		stop, err := s.Watch("b", func([]graylb.Instance) {})
		if err != nil {
			return err
		}
		stop()
		return nil
	}), 5*time.Second, "Watch, Watch and a stop")
	require.NoError(t, r.err)
	assert.Less(t, r.took, time.Second)
	r = awaitTimed(t, timed(s.Close), 5*time.Second, "Supplier.Close")
	assert.Less(t, r.took, time.Second)
	release()
	require.Eventually(t, func() bool { return h.unsubscribed.Load() == 2 }, 5*time.Second, time.Millisecond, "both services unsubscribed once released")
}

// A Supplier on an SDK naming client still follows the server's pushes
// with its subscriptions sent in the background.
func TestIntegration_SDKNamingSupplierFollowsPushes(t *testing.T) {
	svc := fmt.Sprintf("it-sdknaming-%d", time.Now().UnixNano()%1e9)
	instance(t, svc, 7631, nil)
	sup, err := NewSupplier(WithNamingClient(newNaming(t)))
	require.NoError(t, err)
	lb, err := graylb.New(sup)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close(); sup.Close() })
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{7631}, ports(t, lb, grayCtx, svc, 2)) },
		10*time.Second, 50*time.Millisecond)
	instance(t, svc, 7632, map[string]string{"gray": "true"})
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{7632}, ports(t, lb, grayCtx, svc, 2)) },
		10*time.Second, 50*time.Millisecond, "the push that adds a gray instance reaches routing")
}
