package nacos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/require"
)

// scaleLiveHeap returns the heap the garbage collector found live.
func scaleLiveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// scaleInstances are the 4 instances of service s (the last one gray), the
// k-th of them at the address generation gen[k] gives it.
func scaleInstances(service string, s int, gen [4]int) []vo.RegisterInstanceParam {
	out := make([]vo.RegisterInstanceParam, 4)
	for k := range out {
		g := gen[k]
		md := map[string]string{"gray": strconv.FormatBool(k == 3)}
		out[k] = vo.RegisterInstanceParam{Ip: fmt.Sprintf("10.%d.%d.%d", g&255, s>>8&255, s&255), Port: uint64(2000 + k + 4*(g>>8)),
			Weight: 1, Enable: true, Healthy: true, Ephemeral: true, ServiceName: service, Metadata: md}
	}
	return out
}

// serverMetric reads one gauge of the server's Prometheus text (r-nacos
// serves it at /nacos/metrics), -1 when it has none.
func serverMetric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/nacos/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestIntegration_Scale: a Supplier on one connection follows many
// services. N services of 4 instances (one gray) are registered in the
// server; a LoadBalancer over a Supplier learns them by their first picks
// (each once gray and once prod) in three batches (a quarter, a quarter, a
// half), whose time per service must stay within 2× of the first's (the
// learning is O(N)); then picks run for a while, on every service at
// random, while a few services a second have an instance replaced by one
// at a new address, and the live heap after GC at three marks must stay
// within 5 % of each other. Every service has one subscription: one
// Supplier subscription, one SDK callback, and (the server's own count)
// one listener per service on the server. The gray rule holds on every
// pick. Reconciliation is off while the first picks are timed, and one
// round is timed on its own.
//
// make test runs the short form (2 000 services, 20 s of churn);
// GRAYLB_NACOS_SCALE=long the long one (10 000 services, 3 minutes;
// make test-reliability).
func TestIntegration_Scale(t *testing.T) {
	addr := nacosAddr(t)
	n, churnFor, perSecond := 2_000, 20*time.Second, 10
	form := "short"
	if os.Getenv("GRAYLB_NACOS_SCALE") == "long" {
		n, churnFor, perSecond, form = 10_000, 3*time.Minute, 20, "long"
	}
	prefix := fmt.Sprintf("scale-%d-", time.Now().UnixNano()%1e9)
	names := make([]string, n)
	gens := make([][4]int, n)
	for s := range names {
		names[s] = prefix + strconv.Itoa(s)
	}

	// Registered from a few clients at once (one client's requests go one
	// after the other), each service by one client in one batch.
	const registrars = 8
	regs := make([]naming_client.INamingClient, registrars)
	for i := range regs {
		regs[i] = newNaming(t)
	}
	began := time.Now()
	var wg sync.WaitGroup
	var regErr atomic.Value
	for i := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := i; s < n; s += registrars {
				ok, err := regs[i].BatchRegisterInstance(vo.BatchRegisterInstanceParam{ServiceName: names[s], Instances: scaleInstances(names[s], s, gens[s])})
				if err != nil || !ok {
					regErr.Store(fmt.Sprintf("%s: %v %v", names[s], ok, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Nil(t, regErr.Load())
	registered := time.Since(began)

	// No reconciliation while the first picks are timed: a round reads
	// every subscribed service on the same connection (and, for a service
	// pushed since its last repair, writes the disk cache), which would
	// fall on the later batches only. One round is timed on its own below.
	sup, err := NewSupplier(testOpts(t, WithReconcile(time.Hour))...)
	require.NoError(t, err)
	lb, err := graylb.New(sup)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close(); sup.Close() })
	base := scaleLiveHeap()

	// Learning, in batches.
	bounds := []int{0, n / 4, n / 2, n}
	per := make([]time.Duration, 3)
	for b := range per {
		start := time.Now()
		for _, name := range names[bounds[b]:bounds[b+1]] {
			for _, ctx := range []context.Context{grayCtx, prodCtx} {
				in, err := lb.Pick(ctx, name)
				require.NoError(t, err, name)
				require.Equal(t, ctx == grayCtx, graylb.IsGray(in.Metadata["gray"]), "%s: %v", name, in)
			}
		}
		per[b] = time.Since(start) / time.Duration(bounds[b+1]-bounds[b])
	}
	learned := scaleLiveHeap()
	t.Logf("registered %d services in %v; learned in %v, %v, %v a service (batches of %d, %d, %d)", n, registered.Round(time.Millisecond),
		per[0], per[1], per[2], bounds[1], bounds[2]-bounds[1], n-bounds[2])

	// One subscription per service: the Supplier's, one SDK callback each,
	// and the server's count of listeners once every subscription reached it.
	sup.mu.Lock()
	subs := len(sup.subs)
	sup.mu.Unlock()
	require.Equal(t, n, subs, "Supplier subscriptions")
	cl := sup.client.(*Client)
	require.True(t, poll(time.Minute, 100*time.Millisecond, func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return len(cl.syncing) == 0
	}), "subscriptions still being sent to the server")
	for _, name := range []string{names[0], names[n/2], names[n-1]} {
		require.True(t, cl.holder.IsSubscribed("DEFAULT_GROUP@@"+name, ""), name)
	}
	// The server's gauges are collected every few seconds.
	var listeners float64
	poll(time.Minute, time.Second, func() bool {
		listeners = serverMetric(addr, "naming_subscriber_listener_value_size")
		return listeners >= float64(n)
	})

	// Churn and picks.
	var picks, violations atomic.Int64
	var first atomic.Value
	stop := make(chan struct{})
	var pickers sync.WaitGroup
	for g := range 2 {
		pickers.Add(1)
		go func() {
			defer pickers.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; ; i++ {
				if i%256 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				name := names[rng.IntN(n)]
				gray := rng.IntN(2) == 0
				ctx := prodCtx
				if gray {
					ctx = grayCtx
				}
				in, err := lb.Pick(ctx, name)
				picks.Add(1)
				if err != nil || graylb.IsGray(in.Metadata["gray"]) != gray {
					if violations.Add(1) == 1 {
						first.Store(fmt.Sprintf("%s gray=%v: %v %v", name, gray, in.Addr(), err))
					}
				}
			}
		}()
	}
	marks := []time.Duration{churnFor / 3, 2 * churnFor / 3, churnFor}
	heaps := make([]uint64, 0, len(marks))
	rng := rand.New(rand.NewPCG(5, 5))
	changes := 0
	every := time.Second / time.Duration(perSecond)
	tick := time.NewTicker(every)
	begin := time.Now()
	for _, mark := range marks {
		at := time.NewTimer(time.Until(begin.Add(mark)))
	churn:
		for {
			select {
			case <-tick.C:
			case <-at.C:
				break churn
			}
			// A burst ends at the mark: on a machine too busy to keep up, the
			// rate falls behind (the figures say how far) and the marks keep time.
			for changes < int(time.Since(begin)/every) && time.Since(begin) < mark {
				s := rng.IntN(n)
				gens[s][rng.IntN(4)] += 256 // a new port: an address never used
				ok, err := regs[s%registrars].BatchRegisterInstance(vo.BatchRegisterInstanceParam{ServiceName: names[s], Instances: scaleInstances(names[s], s, gens[s])})
				require.NoError(t, err)
				require.True(t, ok)
				changes++
			}
		}
		heaps = append(heaps, scaleLiveHeap())
		t.Logf("at %v: %d changes, %d picks, live heap %.1f MB", mark, changes, picks.Load(), float64(heaps[len(heaps)-1])/1e6)
	}
	tick.Stop()
	close(stop)
	pickers.Wait()
	// A change reached the LoadBalancer: the last one made is routed to.
	cache := adapter.For(lb).Cache()
	last := rng.IntN(n)
	gens[last][0] += 256
	want := scaleInstances(names[last], last, gens[last])[0]
	ok, err := regs[last%registrars].BatchRegisterInstance(vo.BatchRegisterInstanceParam{ServiceName: names[last], Instances: scaleInstances(names[last], last, gens[last])})
	require.NoError(t, err)
	require.True(t, ok)
	pushed := time.Now()
	require.True(t, poll(30*time.Second, 20*time.Millisecond, func() bool {
		l, err := cache.Instances(context.Background(), names[last])
		if err != nil {
			return false
		}
		for _, in := range l {
			if in.Host == want.Ip && in.Port == int(want.Port) {
				return true
			}
		}
		return false
	}), "a replaced instance never reached the LoadBalancer")
	applied := time.Since(pushed)

	// A reconciliation round (every DefaultReconcile) reads every service;
	// the first after the churn repairs those pushed since, the second
	// none.
	var rounds []time.Duration
	for range 2 {
		start := time.Now()
		sup.reconcileOnce()
		rounds = append(rounds, time.Since(start).Round(time.Millisecond))
	}
	rss := serverMetric(addr, "app_rss_memory")

	lo, hi := heaps[0], heaps[0]
	for _, h := range heaps {
		lo, hi = min(lo, h), max(hi, h)
	}
	spread := float64(hi-lo) / float64(lo) * 100
	ratio := float64(per[2]) / float64(per[0])
	var heapText []string
	for i, h := range heaps {
		heapText = append(heapText, fmt.Sprintf("%v %.1f MB", marks[i], float64(h)/1e6))
	}
	fragment(t, "scale-nacos", fmt.Sprintf(
		"| %s | %d services × 4 instances registered in %v; one Supplier | %v, %v, %v a service (%.2f×) | %d list changes (%d a second asked, %.1f reached) over %v, %d picks; a change routed %v after it was made | %s (spread %.1f %%); %.0f B a service learned | %d Supplier subscriptions, %.0f listeners on the server | %.0f MB | %v, then %v | %d |\n",
		form, n, registered.Round(time.Second), per[0].Round(time.Microsecond), per[1].Round(time.Microsecond), per[2].Round(time.Microsecond), ratio,
		changes, perSecond, float64(changes)/churnFor.Seconds(), churnFor, picks.Load(), applied.Round(time.Millisecond), strings.Join(heapText, ", "), spread,
		float64(learned-base)/float64(n), subs, listeners, rss, rounds[0], rounds[1], violations.Load()))
	if v := first.Load(); v != nil {
		t.Fatalf("%d picks broke the gray rule or failed; first: %s", violations.Load(), v)
	}
	require.Less(t, ratio, 2.0, "a service cost %.2f× to learn in the last batch what it cost in the first", ratio)
	require.LessOrEqual(t, spread, 5.0, "live heap after GC: %s", strings.Join(heapText, ", "))
	require.Equal(t, float64(n), listeners, "the server's listeners: one per service")
}
