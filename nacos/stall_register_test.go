package nacos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With the server stalled or dead, Registration.CloseContext returns when
// its ctx ends, Close within DefaultCloseTimeout, and Deregister when its
// ctx ends; each says why it could not deregister.
func TestIntegration_StalledServerRegistrationClose(t *testing.T) {
	for _, fault := range serverFaults {
		t.Run(fault, func(t *testing.T) {
			ctl := script(t)
			svc := fmt.Sprintf("it-stallreg-%s-%d", fault, time.Now().UnixNano()%1e9)
			regs := make([]*Registration, 3)
			for i := range regs {
				ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
				reg, err := Register(ctx, Service{Name: svc, Host: "127.0.0.1", Port: 7611 + i}, testOpts(t, WithDrainWait(0))...)
				cancel()
				require.NoError(t, err)
				t.Cleanup(func() { reg.Close() })
				regs[i] = reg
			}
			takeServerAway(t, ctl, fault)

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			r := awaitTimed(t, timed(func() error { return regs[0].CloseContext(ctx) }), 5*time.Second, "CloseContext with a 300 ms deadline")
			assert.Less(t, r.took, time.Second)
			require.Error(t, r.err)
			assert.True(t, errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, ErrUnavailable), "%v", r.err)

			r = awaitTimed(t, timed(regs[1].Close), 5*time.Second, "Close")
			assert.Less(t, r.took, DefaultCloseTimeout+500*time.Millisecond)
			require.Error(t, r.err)

			ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel2()
			r = awaitTimed(t, timed(func() error { return regs[2].Deregister(ctx2) }), 5*time.Second, "Deregister with a 300 ms deadline")
			assert.Less(t, r.took, time.Second)
			require.ErrorIs(t, r.err, context.DeadlineExceeded)
			r = awaitTimed(t, timed(regs[2].Close), 5*time.Second, "Close after Deregister")
			assert.Less(t, r.took, DefaultCloseTimeout+500*time.Millisecond)
		})
	}
}

// With the server stalled or dead, Register returns when its ctx ends,
// through a Client of its own or a shared one.
func TestIntegration_StalledServerRegister(t *testing.T) {
	for _, fault := range serverFaults {
		t.Run(fault, func(t *testing.T) {
			ctl := script(t)
			svc := fmt.Sprintf("it-stallregister-%s-%d", fault, time.Now().UnixNano()%1e9)
			shared, err := NewClient(context.Background(), testOpts(t)...)
			require.NoError(t, err)
			t.Cleanup(func() { shared.Close() })
			require.Eventually(t, shared.Healthy, 10*time.Second, 20*time.Millisecond)
			takeServerAway(t, ctl, fault)
			if fault == "kill" {
				require.Eventually(t, func() bool { return !shared.Healthy() }, 10*time.Second, 20*time.Millisecond)
			}
			for i, opts := range [][]Option{{WithClient(shared)}, testOpts(t)} {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				r := awaitTimed(t, timed(func() error {
					reg, err := Register(ctx, Service{Name: svc, Host: "127.0.0.1", Port: 7621 + i}, opts...)
					if err == nil {
						reg.Close()
					}
					return err
				}), 10*time.Second, fmt.Sprintf("Register with a 300 ms deadline (shared Client: %v)", i == 0))
				cancel()
				require.Error(t, r.err)
				assert.Less(t, r.took, time.Second)
			}
		})
	}
}

// hangingRegistrar is an SDK naming client whose RegisterInstance hangs
// until released, then succeeds.
type hangingRegistrar struct {
	*fakeRegistrar
	release chan struct{}
}

func (h *hangingRegistrar) RegisterInstance(vo.RegisterInstanceParam) (bool, error) {
	<-h.release
	return true, nil
}

// Through an SDK naming client (WithNamingClient), Register returns when
// its ctx ends; a registration the SDK completes afterwards is taken back,
// so the SDK does not keep registering an instance nobody holds.
func TestRegister_ViaSDKHonoursCtx(t *testing.T) {
	h := &hangingRegistrar{fakeRegistrar: newFakeRegistrar(), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := awaitTimed(t, timed(func() error {
		_, err := Register(ctx, Service{Name: "svc", Host: "127.0.0.1", Port: 8080}, WithNamingClient(h))
		return err
	}), 5*time.Second, "Register with a 100 ms deadline")
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	assert.Less(t, r.took, time.Second)
	release()
	within(t, h.deregistered, 5*time.Second, "the late registration taken back")
}
