package debugpage_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/policy"
)

func TestSnapshotAndDebugShowEjections(t *testing.T) {
	hostile := `<script>alert(1)</script>`
	list := mix("svc", nil, nil, []string{"gray", "true", "note", hostile, "version", `"><img src=x onerror=alert(1)>`},
		[]string{"gray", "true"})
	lb, clk, events := ejectionLB(t, list, graylb.OutlierConfig{BaseEjectionTime: 10 * time.Second})
	ctx := context.Background()
	gray := withHeaders(ctx, "gray", "true")
	bad := list[2].Addr()

	// A prod call in flight, a gray one done.
	inflight := callsTo(t, lb, ctx, list[0].Addr(), 1)
	callsTo(t, lb, gray, list[3].Addr(), 1)[0].End(adapter.OK)
	failN(t, lb, gray, bad, 5)
	waitRebuild(t, events)

	st, ok := lb.Snapshot("svc")
	require.True(t, ok)
	require.Equal(t, 2, st.Prod)
	require.Equal(t, 1, st.Gray, "the ejected instance is not routable")
	require.Equal(t, 0, st.EjectedProd)
	require.Equal(t, 1, st.EjectedGray)
	require.Len(t, st.Instances, 4)
	for i, want := range []string{list[0].Addr(), list[1].Addr(), list[3].Addr(), bad} {
		require.Equal(t, want, st.Instances[i].Addr, "routable instances of a kind first, then its ejected ones")
		require.NotNil(t, st.Instances[i].Stats)
	}
	ej := st.Instances[3]
	require.Equal(t, graylb.Gray, ej.Kind)
	require.False(t, ej.Usable)
	require.Empty(t, ej.Subsets)
	require.True(t, ej.Stats.Ejected)
	require.Equal(t, 5, ej.Stats.Failures)
	require.Equal(t, hostile, ej.Metadata["note"])
	require.Equal(t, int64(1), st.Instances[0].Stats.InFlight)
	require.False(t, st.Instances[0].Stats.Ejected)
	require.Positive(t, st.Instances[2].Stats.Latency, "a result feeds the estimate")

	es := lb.Ejections()
	require.True(t, es.Enabled)
	require.Equal(t, uint64(1), es.Ejections)
	require.Equal(t, []graylb.EjectionCount{{Service: "svc", Kind: graylb.Gray, Ejections: 1}}, es.Counts)
	require.NotNil(t, es.Last)
	require.Equal(t, bad, es.Last.Addr)
	require.Equal(t, 10*time.Second, es.Last.For)
	require.Equal(t, 1, es.Ejected, "ejected now")

	h := debugpage.Handler(lb)
	_, body := debugGet(t, h, "/?format=json")
	require.NotContains(t, body, "<script")
	var ds debugpage.State
	require.NoError(t, json.Unmarshal([]byte(body), &ds))
	require.True(t, ds.Ejections.Enabled)
	require.Equal(t, 1, ds.Ejections.Ejected)
	require.Equal(t, uint64(1), ds.Ejections.Ejections)
	require.Equal(t, []graylb.EjectionCount{{Service: "svc", Kind: graylb.Gray, Ejections: 1}}, ds.Ejections.Counts)
	require.Equal(t, bad, ds.Ejections.Last.Addr)
	require.Equal(t, 10*time.Second, ds.Ejections.Last.For)
	require.True(t, ds.Ejections.Last.At.Equal(clk.Now()), "at %v, by the outlier detection's clock", ds.Ejections.Last.At)
	require.Contains(t, body, `"forNs": 10000000000`)
	sv := ds.Services[0]
	require.Equal(t, 1, sv.EjectedGray)
	require.Equal(t, &graylb.InstanceStats{Ejected: true, InFlight: 0, Latency: sv.Instances[3].Stats.Latency, Failures: 5},
		sv.Instances[3].Stats)
	require.Greater(t, sv.Instances[3].Stats.Latency, 500*time.Millisecond, "a failure counts as a second, decayed since")
	require.Equal(t, int64(1), sv.Instances[0].Stats.InFlight)

	_, page := debugGet(t, h, "/")
	require.NotContains(t, page, "<script")
	require.NotContains(t, page, "<img")
	require.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Contains(t, page, `<span class="bad ejected">ejected</span>`)
	require.Equal(t, 3, strings.Count(page, `<span class="admitted">admitted</span>`))
	require.Contains(t, page, `<td class="num" id="ejected-now">1</td>`)
	require.Contains(t, page, "ejected: 0 prod, 1 gray")
	require.Contains(t, page, "for 10s")

	// Readmitted: routable again, counted.
	clk.Advance(10 * time.Second)
	waitRebuild(t, events)
	st, _ = lb.Snapshot("svc")
	require.Equal(t, 2, st.Gray)
	require.Zero(t, st.EjectedGray)
	require.Len(t, st.Instances, 4)
	es = lb.Ejections()
	require.Equal(t, uint64(1), es.Readmissions)
	require.Zero(t, es.Last.For)
	for _, c := range inflight {
		c.End(adapter.OK)
	}
}

func TestDebugEjectionsOffAndConcurrent(t *testing.T) {
	// A policy that reads Stats keeps them without outlier detection.
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 9001), inst("svc", 9002)}, graylb.WithPolicy(policy.P2C()))
	_, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	st, _ := lb.Snapshot("svc")
	require.NotNil(t, st.Instances[0].Stats)
	require.False(t, lb.Ejections().Enabled)
	_, page := debugGet(t, debugpage.Handler(lb), "/")
	require.Contains(t, page, `id="ejections-off"`)

	// Ejections, readmissions and page reads at once (run with -race).
	list := mix("svc", nil, nil, nil, nil)
	lb2, clk, _ := ejectionLB(t, list, graylb.OutlierConfig{ConsecutiveFailures: 1, BaseEjectionTime: time.Second})
	h := debugpage.Handler(lb2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			r, err := adapter.For(lb2).Route(context.Background(), "svc", nil)
			if err != nil {
				continue
			}
			r.Start().End(adapter.Answer(i%3 == 0))
			if i%10 == 0 {
				clk.Advance(time.Second)
			}
		}
	}()
	for i := 0; i < 30; i++ {
		_, body := debugGet(t, h, "/?format=json")
		var ds debugpage.State
		require.NoError(t, json.Unmarshal([]byte(body), &ds))
		_, _ = debugGet(t, h, "/")
	}
	wg.Wait()
	require.Positive(t, lb2.Ejections().Ejections)
}
