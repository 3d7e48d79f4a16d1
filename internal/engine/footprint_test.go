package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/rotor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// footprintSource is a static Supplier of many services.
type footprintSource map[string][]Instance

func (s footprintSource) Instances(_ context.Context, service string) ([]Instance, error) {
	if l, ok := s[service]; ok {
		return l, nil
	}
	return nil, ErrUnknownService
}
func (s footprintSource) Watch(string, func([]Instance)) (func(), error) { return func() {}, nil }

// footprintFixture is services × instances: half the instances gray, and
// with versions each tagged one of three versions.
func footprintFixture(services, instances int, versions bool) (footprintSource, []string) {
	src := footprintSource{}
	names := make([]string, services)
	for s := range names {
		names[s] = "svc-" + strconv.Itoa(s)
		list := make([]Instance, instances)
		for i := range list {
			md := map[string]string{"gray": strconv.FormatBool(i%2 == 1)}
			if versions {
				md["version"] = "v" + strconv.Itoa(1+i/2%3)
			}
			list[i] = NewInstance(names[s], fmt.Sprintf("10.%d.%d.%d", s/256%256, s%256, i%256), 8000+i/256, md)
		}
		src[names[s]] = list
	}
	return src, names
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// footprint returns the heap a LoadBalancer over services × instances
// holds once every service was picked once gray and once prod.
func footprint(t testing.TB, services, instances int, versions bool) uint64 {
	src, names := footprintFixture(services, instances, versions)
	var opts []Option
	if versions {
		opts = append(opts, WithFilters(NewVersionFilter()))
	}
	gray := WithValue(WithValue(context.Background(), "gray", "true"), "version", "v1")
	prod := WithValue(WithValue(context.Background(), "gray", "false"), "version", "v1")
	before := liveHeap()
	lb, err := New(src, opts...)
	require.NoError(t, err)
	for _, name := range names {
		for _, ctx := range []context.Context{gray, prod} {
			_, err := lb.Pick(ctx, name)
			require.NoError(t, err)
		}
	}
	after := liveHeap()
	runtime.KeepAlive(lb)
	runtime.KeepAlive(src)
	lb.Close()
	return after - before
}

// footprintBudget is the most a LoadBalancer may hold per service at
// 1 000 services of 10 instances (half of them gray), picked once gray and
// once prod: plain, and with a VersionFilter over three versions.
const (
	footprintBudgetPlain     = 2000
	footprintBudgetVersioned = 4000
)

// TestFootprint measures what a LoadBalancer holds per service (heap after
// GC, the supplier's own lists not counted: the Cache keeps them without a
// copy) and fails past the budgets. The least of three runs is taken, so
// that a stray allocation elsewhere in the process does not count. The
// race detector does not change these sizes, so the test runs under it too.
func TestFootprint(t *testing.T) {
	rows := []struct {
		services, instances int
		versions            bool
		budget              uint64 // per service; 0: logged only
	}{
		{1000, 10, false, footprintBudgetPlain},
		{1000, 10, true, footprintBudgetVersioned},
		{1000, 100, true, 0},
		{10000, 10, true, 0},
	}
	for _, r := range rows {
		if r.budget == 0 && (testing.Short() || os.Getenv("GRAYLB_FOOTPRINT_ALL") == "") {
			continue // the large rows: GRAYLB_FOOTPRINT_ALL=1
		}
		least := uint64(math.MaxUint64)
		for range 3 {
			least = min(least, footprint(t, r.services, r.instances, r.versions))
		}
		per := least / uint64(r.services)
		t.Logf("%d services × %d instances, versions %v: %d B per service, %d B per instance, %.1f MB in all",
			r.services, r.instances, r.versions, per, least/uint64(r.services*r.instances), float64(least)/1e6)
		if r.budget > 0 {
			assert.LessOrEqual(t, per, r.budget, "%d services × %d instances, versions %v: bytes per service", r.services, r.instances, r.versions)
		}
	}
}

// The Cache keeps a Supplier's list itself when it keeps every instance
// of it (no second copy), capped so that no append can write into it, and
// a copy when it drops one.
func TestCache_KeepsTheSuppliersListOnce(t *testing.T) {
	src, names := footprintFixture(2, 4, false)
	bad := src[names[1]]
	bad[2].Healthy = false
	c, err := NewCache(src)
	require.NoError(t, err)
	defer c.Close()
	got, err := c.Instances(context.Background(), names[0])
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Same(t, &src[names[0]][0], &got[0], "a list kept whole is the supplier's own")
	require.Equal(t, 4, cap(got))
	got, err = c.Instances(context.Background(), names[1])
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.NotSame(t, &bad[0], &got[0])
	require.Equal(t, []Instance{bad[0], bad[1], bad[3]}, got)
}

// Every round-robin leaf that keeps its turns in place is on a cache line
// of its own, so the picks of one leaf write no line another leaf's picks
// read; a leaf picked on two cores at once takes its sharded counters.
func TestLeavesOwnTheirLines(t *testing.T) {
	src, names := footprintFixture(1, 40, true)
	lb, err := New(src, WithFilters(NewVersionFilter()))
	require.NoError(t, err)
	defer lb.Close()
	gray := WithValue(WithValue(context.Background(), "gray", "true"), "version", "v1")
	_, err = lb.Pick(gray, names[0])
	require.NoError(t, err)
	tr := lb.services.Load().get(names[0]).tree.Load()
	inPlace := 0
	var visit func(n *node)
	visit = func(n *node) {
		if !n.isLeaf() {
			for i := range n.ext.children {
				visit(&n.ext.children[i])
			}
			return
		}
		if len(n.instances) > 0 && n.pickerOf() == Picker(n) {
			inPlace++
			require.Zero(t, uintptr(unsafe.Pointer(n))%cacheline.Size, "a leaf with its turns in place is not at a cache line's start")
		}
	}
	for _, n := range tr.children {
		visit(n)
	}
	require.Equal(t, 8, inPlace, "prod and gray: every instance, v1, v2, v3")

	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the contention half needs two Ps")
	}
	leaf := &tr.flat[grayIdxGray].leaves[tr.flat[grayIdxGray].choice.choose("v1", "")]
	require.False(t, leaf.t.Sharded(), "one pick took a rotor")
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !leaf.t.Sharded() && time.Now().Before(deadline) {
				for i := 0; i < 1000; i++ {
					in, err := lb.Pick(gray, names[0])
					if err != nil || in.Metadata["version"] != "v1" || in.Metadata["gray"] != "true" {
						t.Errorf("picked %v, %v", in, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	require.True(t, leaf.t.Sharded(), "two goroutines picking one leaf for 30 s never made it shard")
	marked := leaf.t.Word()
	require.GreaterOrEqual(t, marked, uint64(rotor.ShardedMark))
	_, err = lb.Pick(gray, names[0])
	require.NoError(t, err)
	require.Equal(t, marked, leaf.t.Word(), "a sharded leaf wrote its counter word")
}

// A list whose prod instances all come before its gray ones (every list
// without a gray instance) is routed without a copy: the tree's lists are
// runs of the supplier's own, which a VersionFilter then leaves as they are.
func TestTree_ListInOrderIsNotCopied(t *testing.T) {
	for _, c := range []struct {
		name  string
		gray  func(i int) bool
		opts  []Option
		share bool
	}{
		{"no gray instance", func(int) bool { return false }, nil, true},
		{"prod first, then gray", func(i int) bool { return i >= 6 }, nil, true},
		{"mixed", func(i int) bool { return i%2 == 1 }, nil, false},
		{"no gray instance, versions", func(int) bool { return false }, []Option{WithFilters(NewVersionFilter())}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			list := make([]Instance, 10)
			for i := range list {
				list[i] = NewInstance("svc", "10.0.0.1", 8000+i, map[string]string{"gray": strconv.FormatBool(c.gray(i)), "version": "v" + strconv.Itoa(i%3)})
			}
			orig := append([]Instance(nil), list...)
			lb, err := New(footprintSource{"svc": list}, c.opts...)
			require.NoError(t, err)
			defer lb.Close()
			for _, g := range []string{"true", "false"} {
				in, err := lb.Pick(WithValue(WithValue(context.Background(), "gray", g), "version", "v1"), "svc")
				require.NoError(t, err)
				if len(c.opts) > 0 {
					require.Equal(t, "v1", in.Metadata["version"])
				}
			}
			tr := lb.services.Load().get("svc").tree.Load()
			prod := tr.children[grayIdxProd].instances
			require.NotEmpty(t, prod)
			assert.Equal(t, c.share, &prod[0] == &list[0], "the prod list is the supplier's own")
			assert.Equal(t, orig, list, "the supplier's list is unchanged")
		})
	}
}

// With no gray instance, the "all" subtree is over prod's very list: it
// shares the groupings of prod's version stage, not its leaves (each kind
// keeps a rotation of its own: TestTree_EachKindRotatesOverItsOwnLeaf).
func TestTree_AllOverProdsListSharesItsGroupings(t *testing.T) {
	list := make([]Instance, 9)
	for i := range list {
		list[i] = NewInstance("svc", "10.0.0.1", 8000+i, map[string]string{"version": "v" + strconv.Itoa(i%3)})
	}
	lb, err := New(footprintSource{"svc": list}, WithFilters(NewVersionFilter()))
	require.NoError(t, err)
	defer lb.Close()
	_, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	tr := lb.services.Load().get("svc").tree.Load()
	prod, all := tr.children[grayIdxProd], tr.children[grayIdxAll]
	require.NotSame(t, prod, all)
	require.False(t, prod.isLeaf())
	require.Same(t, prod.ext.stage, all.ext.stage, "one version stage")
	require.Len(t, all.ext.children, len(prod.ext.children))
	for i := range prod.ext.children {
		p, a := &prod.ext.children[i], &all.ext.children[i]
		assert.NotSame(t, p, a, "leaf %d: a leaf of its own", i)
		assert.True(t, sameList(p.instances, a.instances), "leaf %d: prod's grouping", i)
	}
}
