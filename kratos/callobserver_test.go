package graylbkratos_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	"github.com/graylb/graylb/policy"
)

// observed is one call a CallObserver was told of.
type observed struct {
	service, addr string
	kind          graylb.Kind
	ok            bool
	latency       time.Duration
}

// callLog is a CallObserver that keeps what it is told.
type callLog struct {
	mu    sync.Mutex
	calls []observed
}

func (l *callLog) observe(service string, inst graylb.Instance, kind graylb.Kind, ok bool, latency time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, observed{service, inst.Addr(), kind, ok, latency})
}

// take returns the calls told since the last take, waiting up to 2 s for
// want of them.
func (l *callLog) take(want int) []observed {
	poll(2*time.Second, 5*time.Millisecond, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.calls) >= want })
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

var observerPolicies = []struct {
	name   string
	policy policy.Policy
}{
	{"round robin", policy.RoundRobin()},
	{"weighted", policy.WeightedRoundRobin()},
	{"random", policy.Random()},
	{"p2c", policy.P2C()},
}

// TestSelectorCallObserver: every call a Kratos client makes through
// graylb's Selector reaches the LoadBalancer's CallObserver, under every
// policy, with outlier detection on or off, with the service, the
// instance, the kind that served it and its outcome.
func TestSelectorCallObserver(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		for _, pol := range observerPolicies {
			for _, outlier := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/outlier=%v", scheme, pol.name, outlier), func(t *testing.T) {
					log := &callLog{}
					opts := []graylb.Option{graylb.WithPolicy(pol.policy), graylb.WithCallObserver(log.observe)}
					if outlier {
						// Never ejects within the test: its kinds stay put.
						opts = append(opts, graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1000}))
					}
					reg := graylb.NewRegistry()
					lb := newLB(t, reg, graylb.Rules{}, opts...)
					b := graylbkratos.NewBuilder(lb)
					t.Cleanup(b.Close)
					selector.SetGlobalSelector(b)

					var failGray atomic.Bool
					addrs := map[bool]string{}
					for _, gray := range []bool{false, true} {
						kind := kindName(gray)
						s := startServer(t, scheme, func(context.Context) (string, error) {
							if gray && failGray.Load() {
								return "", kerrors.InternalServer("BOOM", "a failing gray build")
							}
							return kind, nil
						})
						register(t, reg, "svc", s.endpoint, gray)
						addrs[gray] = hostPort(t, s.endpoint)
					}
					service := "svc." + scheme
					call := newCaller(t, scheme, service, graylbkratos.NewDiscovery(reg), graylbkratos.Client(lb))
					ctxOf := func(gray bool) context.Context {
						return graylb.WithValue(context.Background(), "gray", fmt.Sprint(gray))
					}
					// Until both instances answer (Kratos' gRPC client hands
					// its selector only READY connections).
					warmUp(t, call, ctxOf)
					log.take(0)

					failGray.Store(true)
					const n = 10
					for i := 0; i < n; i++ {
						gray := i%2 == 1
						_, err := call(ctxOf(gray))
						if gray != (err != nil) {
							t.Fatalf("call %d (gray %v): %v", i, gray, err)
						}
					}
					got := log.take(n)
					if len(got) != n {
						t.Fatalf("the CallObserver was told of %d calls of %d: %+v", len(got), n, got)
					}
					for i, c := range got {
						gray := i%2 == 1
						want := observed{service: service, addr: addrs[gray], kind: graylb.Prod, ok: !gray}
						if gray {
							want.kind = graylb.Gray
						}
						if c.service != want.service || c.addr != want.addr || c.kind != want.kind || c.ok != want.ok || c.latency <= 0 {
							t.Errorf("call %d told as %+v, want %+v with a positive latency", i, c, want)
						}
					}
				})
			}
		}
	}
}

// TestSelectorCallObserverTimedOut: a call that runs past its caller's
// deadline reaches the CallObserver as failed, under every policy.
func TestSelectorCallObserverTimedOut(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		for _, pol := range observerPolicies {
			t.Run(scheme+"/"+pol.name, func(t *testing.T) {
				log := &callLog{}
				reg := graylb.NewRegistry()
				lb := newLB(t, reg, graylb.Rules{}, graylb.WithPolicy(pol.policy), graylb.WithCallObserver(log.observe),
					graylb.WithOutlierDetection(graylb.OutlierConfig{ConsecutiveFailures: 1000}))
				b := graylbkratos.NewBuilder(lb)
				t.Cleanup(b.Close)
				selector.SetGlobalSelector(b)
				var slow atomic.Bool
				s := startServer(t, scheme, func(ctx context.Context) (string, error) {
					if slow.Load() {
						select {
						case <-ctx.Done():
							return "", ctx.Err()
						case <-time.After(time.Second):
						}
					}
					return "prod", nil
				})
				register(t, reg, "svc", s.endpoint, false)
				service := "svc." + scheme
				call := newCaller(t, scheme, service, graylbkratos.NewDiscovery(reg), graylbkratos.Client(lb))
				if _, err := call(context.Background()); err != nil {
					t.Fatal(err)
				}
				log.take(1)
				slow.Store(true)
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				if _, err := call(ctx); err == nil {
					t.Fatal("a call past its deadline succeeded")
				}
				got := log.take(1)
				if len(got) != 1 || got[0].ok || got[0].service != service || got[0].kind != graylb.Prod || got[0].latency < 40*time.Millisecond {
					t.Fatalf("the CallObserver was told %+v, want one failed prod call of %s of at least 40ms", got, service)
				}
			})
		}
	}
}

// warmUp calls until a prod and a gray call each reached their own kind.
func warmUp(t *testing.T, call caller, ctxOf func(gray bool) context.Context) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, gray := range []bool{false, true} {
		var got string
		var err error
		if !poll(time.Until(deadline), 20*time.Millisecond, func() bool {
			got, err = call(ctxOf(gray))
			return err == nil && got == kindName(gray)
		}) {
			t.Fatalf("a %s call answered %q, %v after 20s", kindName(gray), got, err)
		}
	}
}

// hostPort is the host:port of a Kratos endpoint scheme://host:port.
func hostPort(t *testing.T, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
