package nacos

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRegistrar is an SDK naming client that records registrations:
// deregistered is closed at the first DeregisterInstance, which answers
// refuse (false) or waits for release when they are set.
type fakeRegistrar struct {
	naming_client.INamingClient // the methods Register does not use; nil
	deregistrations             atomic.Int64
	deregistered                chan struct{}
	once                        sync.Once
	refuse                      bool
	release                     chan struct{}
}

func newFakeRegistrar() *fakeRegistrar { return &fakeRegistrar{deregistered: make(chan struct{})} }

func (f *fakeRegistrar) RegisterInstance(vo.RegisterInstanceParam) (bool, error) { return true, nil }

func (f *fakeRegistrar) DeregisterInstance(vo.DeregisterInstanceParam) (bool, error) {
	f.deregistrations.Add(1)
	f.once.Do(func() { close(f.deregistered) })
	if f.release != nil {
		<-f.release
	}
	return !f.refuse, nil
}

// within waits for ch, failing the test after d with what it waited for.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// removalEnded waits until reg's removal ended and its result was
// recorded: the fake's deregistered says only that it began.
func removalEnded(t *testing.T, reg *Registration) {
	t.Helper()
	require.Eventually(t, func() bool {
		reg.mu.Lock()
		defer reg.mu.Unlock()
		return reg.removal != nil && isClosed(reg.removal)
	}, 10*time.Second, time.Millisecond, "the removal ended")
}

// returned reports whether ch is closed, without waiting.
func returned(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func registerFake(t *testing.T, f *fakeRegistrar, opts ...Option) *Registration {
	t.Helper()
	reg, err := Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8080}, append([]Option{WithNamingClient(f)}, opts...)...)
	require.NoError(t, err)
	return reg
}

// A graceful stop in the documented order: the server keeps answering
// after the instance left the registry, for as long as the drain wait
// lasts (an hour here: only the caller's ctx ends it), and stops only
// after Deregister returned. No clock is read: the order is what is
// checked.
func TestRegistration_DeregisterWaitsWhileTheServerStillServes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	f := newFakeRegistrar()
	reg := registerFake(t, f, WithDrainWait(time.Hour))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deregistered, stopped := make(chan struct{}), make(chan struct{})
	var deregErr error
	go func() { // the process's stop path
		defer close(stopped)
		deregErr = reg.Deregister(ctx)
		close(deregistered)
		srv.Config.Shutdown(context.Background())
	}()
	within(t, f.deregistered, 10*time.Second, "the instance deregistered")
	removalEnded(t, reg)
	for i := 0; i < 5; i++ {
		resp, err := srv.Client().Get(srv.URL)
		require.NoError(t, err, "the server answers while Deregister waits")
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.False(t, returned(deregistered), "Deregister returned before its drain wait ended")

	cancel() // the process's stop deadline
	within(t, stopped, 10*time.Second, "Deregister returns when ctx ends; the server stops")
	require.ErrorIs(t, deregErr, context.Canceled, "a drain wait cut short says so")
	assert.Contains(t, deregErr.Error(), "drain wait cut short")
	assert.Contains(t, deregErr.Error(), "127.0.0.1:8080")
	_, err := srv.Client().Get(srv.URL)
	assert.Error(t, err, "stopped after Deregister")
	assert.EqualValues(t, 1, f.deregistrations.Load())
}

// Deregister removes the instance once; Close after it only closes, and
// every later call returns the same result at once.
func TestRegistration_DeregisterOnceCloseAfter(t *testing.T) {
	f := newFakeRegistrar()
	reg := registerFake(t, f, WithDrainWait(0))
	require.NoError(t, reg.Deregister(context.Background()))
	//lint:ignore SA1012 a nil context is hostile input
	require.NoError(t, reg.Deregister(nil), "again, and a nil context")
	require.NoError(t, reg.Close())
	require.NoError(t, reg.Close())
	assert.EqualValues(t, 1, f.deregistrations.Load())

	// Close first: Deregister then neither removes again nor waits.
	f = newFakeRegistrar()
	reg = registerFake(t, f, WithDrainWait(time.Hour))
	require.NoError(t, reg.Close())
	// The hour runs from Close's removal: Deregister still owes the rest of
	// it (a ctx already ended says the wait was cut short).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, reg.Deregister(ctx), context.Canceled)
	assert.EqualValues(t, 1, f.deregistrations.Load())
}

// Close beside a Deregister that is waiting: it returns without the
// drain wait, and the instance is removed once.
func TestRegistration_CloseDuringTheDrainWait(t *testing.T) {
	f := newFakeRegistrar()
	reg := registerFake(t, f, WithDrainWait(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan struct{})
	go func() { reg.Deregister(ctx); close(waiting) }()
	within(t, f.deregistered, 10*time.Second, "deregistered")

	closed := make(chan struct{})
	var err error
	go func() { err = reg.Close(); close(closed) }()
	within(t, closed, 10*time.Second, "Close does not wait for the drain")
	require.NoError(t, err)
	assert.False(t, returned(waiting), "Deregister still waits")
	cancel()
	within(t, waiting, 10*time.Second, "Deregister returns when ctx ends")
	assert.EqualValues(t, 1, f.deregistrations.Load())
}

// Concurrent Deregister calls share one removal; each honours its own ctx
// during the wait.
func TestRegistration_ConcurrentDeregister(t *testing.T) {
	f := newFakeRegistrar()
	reg := registerFake(t, f, WithDrainWait(time.Hour))
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	firstDone := make(chan struct{})
	go func() { reg.Deregister(first); close(firstDone) }()
	within(t, f.deregistered, 10*time.Second, "deregistered")

	second, cancelSecond := context.WithCancel(context.Background())
	cancelSecond()
	err := reg.Deregister(second)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, returned(firstDone), "the first caller still waits")
	cancelFirst()
	within(t, firstDone, 10*time.Second, "first returns")
	assert.EqualValues(t, 1, f.deregistrations.Load())
}

// A refused removal is an error naming the instance; the wait follows it
// all the same (the server may have applied it), and Close returns the
// same error.
func TestRegistration_RefusedRemovalStillWaits(t *testing.T) {
	f := newFakeRegistrar()
	f.refuse = true
	reg := registerFake(t, f, WithDrainWait(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() { err = reg.Deregister(ctx); close(done) }()
	within(t, f.deregistered, 10*time.Second, "deregistered")
	removalEnded(t, reg)
	assert.False(t, returned(done), "waits after a refused removal too")
	cancel()
	within(t, done, 10*time.Second, "returns when ctx ends")
	assert.Contains(t, err.Error(), "refused by the server")
	assert.Contains(t, err.Error(), "127.0.0.1:8080")
	assert.ErrorIs(t, err, context.Canceled)
	cerr := reg.Close()
	require.Error(t, cerr)
	assert.Contains(t, cerr.Error(), "refused by the server")
}

// A removal that hangs is bounded by ctx; no drain wait follows a ctx
// that has ended.
func TestRegistration_RemovalHonoursCtx(t *testing.T) {
	f := newFakeRegistrar()
	f.release = make(chan struct{})
	defer close(f.release)
	reg := registerFake(t, f, WithDrainWait(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() { err = reg.Deregister(ctx); close(done) }()
	within(t, f.deregistered, 10*time.Second, "removal started")
	cancel()
	within(t, done, 10*time.Second, "Deregister returns when ctx ends during the removal")
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "deregister 127.0.0.1:8080")
}

// The drain wait's option: the default, zero, and a negative value (kept
// default).
func TestWithDrainWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want time.Duration
	}{
		{"default", nil, DefaultDrainWait},
		{"zero", []Option{WithDrainWait(0)}, 0},
		{"set", []Option{WithDrainWait(5 * time.Second)}, 5 * time.Second},
		{"negative keeps the default", []Option{WithDrainWait(-time.Second)}, DefaultDrainWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := registerFake(t, newFakeRegistrar(), tc.opts...)
			assert.Equal(t, tc.want, reg.drain)
		})
	}
	assert.Equal(t, 2*time.Second, DefaultDrainWait)
}

// TestIntegration_DeregisterDrains: against the real server, Deregister
// returns only after a subscribed client stopped picking the instance;
// the push that told it came within the default drain wait.
func TestIntegration_DeregisterDrains(t *testing.T) {
	svc := uniqueService(t)
	instance(t, svc, 7501, nil)
	gray := true
	reg, err := Register(context.Background(), Service{Name: svc, Host: "127.0.0.1", Port: 7502, Gray: &gray}, testOpts(t)...)
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	lb, _ := newLB(t)
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{7502}, ports(t, lb, grayCtx, svc, 2)) },
		10*time.Second, 50*time.Millisecond)
	var seen atomic.Int64 // unix nanos when the client's list lost 7502
	stop, err := adapter.For(lb).Cache().Watch(svc, func(list []graylb.Instance) {
		for _, in := range list {
			if in.Port == 7502 {
				return
			}
		}
		seen.CompareAndSwap(0, time.Now().UnixNano())
	})
	require.NoError(t, err)
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, reg.Deregister(ctx))
	took := time.Since(start)
	require.NotZero(t, seen.Load(), "Deregister returned (after %v) before the client saw the instance go", took)
	pushed := time.Unix(0, seen.Load()).Sub(start)
	t.Logf("the client saw the deregistration %v after Deregister began; Deregister returned after %v", pushed.Round(time.Millisecond), took.Round(time.Millisecond))
	assert.GreaterOrEqual(t, took, DefaultDrainWait)
	assert.Equal(t, []int{7501}, ports(t, lb, grayCtx, svc, 4), "gray requests fall back to prod")
	require.NoError(t, reg.Close(), "Close after Deregister")
}

// TestIntegration_DeregisterThroughARestart: a graceful stop that begins
// while the server is down (restarting) deregisters once the server is
// back, within Deregister's ctx, and the instance stays off the registry
// although its Client stays open (the SDK registers what it registered
// again after a reconnection).
func TestIntegration_DeregisterThroughARestart(t *testing.T) {
	ctl := script(t)
	restartServer(t)
	svc := uniqueService(t)
	instance(t, svc, 7511, nil)
	cl, err := NewClient(context.Background(), testOpts(t)...)
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	gray := true
	reg, err := Register(context.Background(), Service{Name: svc, Host: "127.0.0.1", Port: 7512, Gray: &gray}, WithClient(cl), WithDrainWait(0))
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	lb, _ := newLB(t, WithRefillWindow(2*time.Second))
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{7512}, ports(t, lb, grayCtx, svc, 2)) },
		10*time.Second, 50*time.Millisecond)

	ctl("stop")
	require.Eventually(t, func() bool { return !cl.Healthy() }, 10*time.Second, 20*time.Millisecond, "the Client saw the server go")
	started := make(chan struct{})
	go func() {
		defer close(started)
		time.Sleep(time.Second) // must sleep: the server stays down a second while Deregister waits for it
		ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
		defer cancel()
		exec.CommandContext(ctx, os.Getenv("GRAYLB_NACOS_SCRIPT"), "start").Run()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	err = reg.Deregister(ctx)
	took := time.Since(begin)
	<-started
	require.NoError(t, err, "deregistered once the server was back")
	t.Logf("Deregister, begun while the server was down (restarted after 1 s), returned after %v", took.Round(time.Millisecond))
	// The registry refills as clients reconnect (the client's Cache holds
	// the lost gray instance for its refill window, 2 s here); the
	// deregistered instance must not come back with them.
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{7511}, ports(t, lb, grayCtx, svc, 4)) },
		15*time.Second, 50*time.Millisecond, "gray requests fall back to prod: the instance stays deregistered")
	list, err := cl.query(ctx, svc, "DEFAULT_GROUP", nil)
	require.NoError(t, err)
	for _, h := range list {
		assert.NotEqual(t, uint64(7512), h.Port, "the server lists the deregistered instance again")
	}
}

// A concurrent Deregister honours its own ctx while another caller's
// removal hangs: it returns ctx's error promptly, the removal goes on, and
// once it ends the first caller and every later call see its result. (The
// second caller used to wait inside the first's removal until it ended.)
func TestRegistration_ConcurrentDeregisterLeavesAHangingRemoval(t *testing.T) {
	f := newFakeRegistrar()
	f.refuse = true
	f.release = make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(f.release) }) }
	t.Cleanup(release)
	reg := registerFake(t, f, WithDrainWait(0), WithTimeout(time.Hour))

	firstDone := make(chan struct{})
	var firstErr error
	go func() { firstErr = reg.Deregister(context.Background()); close(firstDone) }()
	within(t, f.deregistered, 10*time.Second, "the first caller's removal started")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	secondDone := make(chan struct{})
	var secondErr error
	go func() { secondErr = reg.Deregister(ctx); close(secondDone) }()
	within(t, secondDone, 10*time.Second, "the second caller returns when its ctx ends, the removal hanging")
	require.ErrorIs(t, secondErr, context.DeadlineExceeded)
	assert.Contains(t, secondErr.Error(), "127.0.0.1:8080")
	assert.False(t, returned(firstDone), "the first caller still waits for the removal")

	release()
	within(t, firstDone, 10*time.Second, "the first caller returns once the removal ended")
	require.Error(t, firstErr)
	assert.Contains(t, firstErr.Error(), "refused by the server")
	later := reg.Deregister(context.Background())
	require.Error(t, later, "a later call sees the removal's result")
	assert.Contains(t, later.Error(), "refused by the server")
	cerr := reg.Close()
	require.Error(t, cerr)
	assert.Contains(t, cerr.Error(), "refused by the server")
	assert.EqualValues(t, 1, f.deregistrations.Load())
}

// TestIntegration_DeregisterOutlastsItsTimeout: the wait for a lost
// connection is bounded by Deregister's ctx, not by WithTimeout (which
// bounds each call to the server): a server down for four times the
// registration's timeout still hears of the removal within a ctx long
// enough. (The whole removal used to be bounded by WithTimeout: it failed
// with ErrUnavailable before the server was back.)
func TestIntegration_DeregisterOutlastsItsTimeout(t *testing.T) {
	ctl := script(t)
	restartServer(t)
	svc := uniqueService(t)
	cl, err := NewClient(context.Background(), testOpts(t)...)
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	const timeout = 500 * time.Millisecond
	reg, err := Register(context.Background(), Service{Name: svc, Host: "127.0.0.1", Port: 7521}, WithClient(cl), WithDrainWait(0), WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })

	ctl("stop")
	require.Eventually(t, func() bool { return !cl.Healthy() }, 10*time.Second, 20*time.Millisecond, "the Client saw the server go")
	started := make(chan struct{})
	go func() {
		defer close(started)
		time.Sleep(4 * timeout) // must sleep: the server stays down past the registration's timeout, which is what is tested
		ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
		defer cancel()
		exec.CommandContext(ctx, os.Getenv("GRAYLB_NACOS_SCRIPT"), "start").Run()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	begin := time.Now()
	err = reg.Deregister(ctx)
	took := time.Since(begin)
	within(t, started, scriptTimeout, "the server restarted")
	require.NoError(t, err, "deregistered once the server was back (after %v; WithTimeout %v)", took.Round(time.Millisecond), timeout)
	t.Logf("Deregister, begun while the server was down (restarted after %v; WithTimeout %v), returned after %v", 4*timeout, timeout, took.Round(time.Millisecond))
	assert.Greater(t, took, 4*timeout, "Deregister waited for the server")
	list, err := cl.query(ctx, svc, "DEFAULT_GROUP", nil)
	require.NoError(t, err)
	assert.Empty(t, list, "the server lists the deregistered instance")
}

// Close bounds its wait for a Deregister's removal by WithTimeout. With no
// Client of its own it returns then, saying the removal is under way, and
// the removal goes on within Deregister's ctx; with the Client Register
// built, it closes it, which ends the removal, and returns its error.
func TestRegistration_CloseBesideAHangingRemoval(t *testing.T) {
	for _, owned := range []bool{false, true} {
		t.Run(map[bool]string{false: "WithClient", true: "own Client"}[owned], func(t *testing.T) {
			clientCtx, closeClient := context.WithCancel(context.Background())
			defer closeClient()
			started := make(chan struct{})
			reg := &Registration{
				Instance: graylb.NewInstance("svc", "127.0.0.1", 8080, nil),
				timeout:  50 * time.Millisecond,
				// A Client waiting for its lost connection until ctx ends or
				// it closes.
				deregister: func(ctx context.Context) error {
					close(started)
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-clientCtx.Done():
						return errClientClosed
					}
				},
			}
			if owned {
				reg.closeFn = closeClient
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			deregDone := make(chan struct{})
			var deregErr error
			go func() { deregErr = reg.Deregister(ctx); close(deregDone) }()
			within(t, started, 10*time.Second, "the removal started")

			closed := make(chan struct{})
			var closeErr error
			go func() { closeErr = reg.Close(); close(closed) }()
			within(t, closed, 10*time.Second, "Close returns")
			if !owned {
				require.ErrorIs(t, closeErr, context.DeadlineExceeded)
				assert.Contains(t, closeErr.Error(), "still under way")
				assert.False(t, returned(deregDone), "Deregister still waits within its ctx")
				cancel()
				within(t, deregDone, 10*time.Second, "Deregister returns when its ctx ends")
				require.ErrorIs(t, deregErr, context.Canceled)
				return
			}
			require.ErrorIs(t, closeErr, graylb.ErrClosed, "the removal ended by the closed Client")
			within(t, deregDone, 10*time.Second, "Deregister returns with the removal")
			require.ErrorIs(t, deregErr, graylb.ErrClosed)
			assert.Contains(t, deregErr.Error(), "127.0.0.1:8080")
		})
	}
}

// Through an SDK naming client (WithNamingClient), WithTimeout bounds the
// call: a removal whose call hangs ends after it, for Deregister with a
// longer ctx and for Close beside it.
func TestRegistration_SDKCallBoundedByTimeout(t *testing.T) {
	f := newFakeRegistrar()
	f.release = make(chan struct{})
	defer close(f.release)
	reg := registerFake(t, f, WithTimeout(50*time.Millisecond), WithDrainWait(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan struct{})
	var err error
	go func() { err = reg.Deregister(ctx); close(done) }()
	within(t, f.deregistered, 10*time.Second, "the removal started")
	cerr := reg.Close()
	require.ErrorIs(t, cerr, context.DeadlineExceeded)
	within(t, done, 10*time.Second, "Deregister returns once WithTimeout ended the call")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "deregister 127.0.0.1:8080")
	assert.EqualValues(t, 1, f.deregistrations.Load())
}
