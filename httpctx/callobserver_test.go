package httpctx

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call that runs past its caller's deadline is told to the CallObserver
// as failed: its caller saw it fail, and a gray build that hangs must show
// in the call metrics a rollout judges (a cancelled call is not told).
func TestTransport_CallObserverSeesTimedOutCalls(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer hang.Close()
	reg := graylb.NewRegistry()
	in := register(t, reg, "svc", hang, map[string]string{"gray": "true"})
	var mu sync.Mutex
	var seen []string
	obs := func(service string, inst graylb.Instance, kind graylb.Kind, ok bool, latency time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, inst.Addr()+" "+kind.String()+" "+map[bool]string{true: "ok", false: "error"}[ok])
	}
	lb, err := graylb.New(reg, graylb.WithCallObserver(obs))
	require.NoError(t, err)
	defer lb.Close()

	// The caller's deadline (Client.Timeout sets one too).
	client := &http.Client{Transport: NewTransport(lb), Timeout: 100 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodGet, "http://svc/", nil)
	req.Header.Set("gray", "true")
	_, err = client.Do(req)
	require.Error(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
	req.Header.Set("gray", "true")
	_, err = (&http.Client{Transport: NewTransport(lb)}).Do(req)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	// A call its caller cancelled says nothing of the instance.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
	req.Header.Set("gray", "true")
	_, err = (&http.Client{Transport: NewTransport(lb)}).Do(req)
	require.Error(t, err)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{in.Addr() + " gray error", in.Addr() + " gray error"}, seen)
}
