package e2etest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	"github.com/redis/go-redis/v9"
)

// kratosService is the released service as Kratos names it in a registry
// (and graylb's metrics label it): <name>.<scheme>.
const kratosService = releasedService + ".http"

// A rollout whose callers are Kratos services: their HTTP clients pick
// through graylb's Kratos selector, and otelgraylb's CallObserver metrics
// of those calls are what the rollout judges.
func TestRolloutKratosCallers(t *testing.T) {
	needCommand(t)
	for _, tc := range rolloutCases {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			rdb.Set(context.Background(), rulesKey, `{"grayUsers": ["qa-1"]}`, 0)

			reg := graylb.NewRegistry()
			r := graylbkratos.NewRegistrar(reg)
			for i := 0; i < 3; i++ {
				gray := i == 2
				errEvery := int64(0)
				if gray {
					errEvery = tc.errEvery
				}
				var calls atomic.Int64
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					if n := calls.Add(1); errEvery > 0 && n%errEvery == 0 {
						http.Error(w, "gray build failure", http.StatusInternalServerError)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"chain":"ok"}`)
				}))
				t.Cleanup(srv.Close)
				md := map[string]string{}
				if gray {
					md["gray"] = "true"
				}
				si := &registry.ServiceInstance{ID: srv.URL, Name: releasedService, Version: "v1", Metadata: md, Endpoints: []string{srv.URL}}
				if err := r.Register(context.Background(), si); err != nil {
					t.Fatal(err)
				}
			}
			lb, metrics := observedLB(t, reg, addr)
			b := graylbkratos.NewBuilder(lb)
			t.Cleanup(b.Close)
			selector.SetGlobalSelector(b)
			c, err := khttp.NewClient(context.Background(), khttp.WithEndpoint("discovery:///"+kratosService),
				khttp.WithDiscovery(graylbkratos.NewDiscovery(reg)), khttp.WithMiddleware(graylbkratos.Client(lb)),
				khttp.WithTimeout(5*time.Second), khttp.WithBlock())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			var ok, bad atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			t.Cleanup(func() { cancel(); wg.Wait() })
			for w := 0; w < 2; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						var out struct{ Chain string }
						if err := c.Invoke(ctx, http.MethodGet, "/call", nil, &out); err == nil {
							ok.Add(1)
						} else if ctx.Err() == nil {
							bad.Add(1)
						}
						select {
						case <-ctx.Done():
						case <-time.After(4 * time.Millisecond):
						}
					}
				}()
			}
			prom := startPrometheus(t, metrics)
			code, out, errOut := rollout(t, kratosService, addr, registryOf(t, reg, kratosService), prom)
			checkOutcome(t, addr, code, errOut, tc.code, tc.canary, tc.closed, lb)
			if !strings.Contains(out, "canary") {
				t.Fatalf("the output does not say where the rules are:\n%s", out)
			}
			t.Logf("Kratos caller: %d ok, %d failed calls", ok.Load(), bad.Load())
		})
	}
}
