package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A ServicePicker routes as Pick does through every change: a service
// with only a gray instance, a prod one registered later, gray instances
// gone, rules that close gray routing, a nil context.
func TestServicePicker_FollowsListsAndRules(t *testing.T) {
	reg := NewRegistry()
	require.NoError(t, reg.Register(inst("svc", 2, "gray", "true")))
	lb, err := New(reg, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	p, err := lb.Service("svc")
	require.NoError(t, err)
	gray := withHeaders(context.Background(), "gray", "true")

	_, err = p.Pick(context.Background())
	require.ErrorIs(t, err, ErrNoInstance, "a prod request with only a gray instance")

	require.NoError(t, reg.Register(inst("svc", 1)))
	for _, c := range []struct {
		ctx  context.Context
		port int
	}{{gray, 2}, {context.Background(), 1}, {nil, 1}} {
		got, err := p.Pick(c.ctx)
		require.NoError(t, err)
		require.Equal(t, c.port, got.Port)
	}

	require.NoError(t, reg.Deregister("svc", "127.0.0.1:2"))
	got, err := p.Pick(gray)
	require.NoError(t, err)
	require.Equal(t, 1, got.Port, "a gray request falls back when no gray instance is left")

	require.NoError(t, reg.Register(inst("svc", 2, "gray", "true")))
	require.NoError(t, lb.SetRules(Rules{Closed: true}))
	got, err = p.Pick(gray)
	require.NoError(t, err)
	require.Equal(t, 1, got.Port, "closed: no request reaches a gray instance")
}

func TestServicePicker_RefusesBadNames(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)})
	for _, name := range []string{"", "a b", "svc/x", "svc\n", string(make([]byte, 300))} {
		_, err := lb.Service(name)
		require.ErrorIs(t, err, ErrInvalidService, "%q", name)
	}
}

// Pickers of one service used from many goroutines while its list churns
// never send a prod request to a gray instance (run with -race).
func TestServicePicker_ConcurrentChurnKeepsProdOffGray(t *testing.T) {
	reg := NewRegistry()
	require.NoError(t, reg.Register(inst("svc", 1)))
	lb, err := New(reg, WithContextHandler(testHandler))
	require.NoError(t, err)
	defer lb.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, _ := lb.Service("svc")
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := p.Pick(context.Background())
				if err == nil && IsGray(got.Metadata["gray"]) {
					errs <- fmt.Errorf("prod request reached gray %s", got.Addr())
					return
				}
			}
		}()
	}
	for i := 0; i < 300; i++ {
		port := 2 + i%5
		md := []string{"gray", "true"}
		if i%2 == 0 {
			md = []string{"gray", "false"}
		}
		require.NoError(t, reg.Register(inst("svc", port, md...)))
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
