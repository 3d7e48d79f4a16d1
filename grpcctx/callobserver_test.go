package grpcctx

import (
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The balancer reports each RPC to the LoadBalancer's CallObserver, by
// the kind of the instance that served it.
func TestBalancer_CallObserver(t *testing.T) {
	reg := graylb.NewRegistry()
	prod := serve(t, reg, "svc", &testServer{name: "prod"}, nil)
	grayIn := serve(t, reg, "svc", &testServer{name: "gray"}, map[string]string{"gray": "true"})
	var mu sync.Mutex
	seen := map[string]int{}
	obs := func(service string, inst graylb.Instance, kind graylb.Kind, ok bool, latency time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, "svc", service)
		assert.True(t, latency > 0 && latency < time.Minute, "latency %v", latency)
		seen[inst.Addr()+" "+kind.String()+" "+map[bool]string{true: "ok", false: "error"}[ok]]++
	}
	c := dial(t, reg, "svc", graylb.WithCallObserver(obs))
	for i := 0; i < 3; i++ {
		got, err := call(t, c, "true")
		require.NoError(t, err)
		require.Equal(t, "gray", got)
		got, err = call(t, c, "false")
		require.NoError(t, err)
		require.Equal(t, "prod", got)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{grayIn.Addr() + " gray ok": 3, prod.Addr() + " prod ok": 3}, seen)
}
