package main

import (
	"fmt"
	"strings"
	"testing"
)

// byService is Prometheus' answer to a query summed by service: services
// and values in pairs.
func byService(pairs ...any) string {
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, fmt.Sprintf(`{"metric":{"graylb_service":%q},"value":[1700000000.1,%q]}`, pairs[i], fmt.Sprint(pairs[i+1])))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(parts, ",") + `]}}`
}

// promFallBacks serves a fake Prometheus whose callers made calls of svc
// (grayCalls gray ones, prodCalls prod ones, none failed) and whose picks
// of gray requests fell back to prod fellBack times, with up to ejected
// gray instances ejected at once.
func promFallBacks(t testing.TB, grayCalls, prodCalls, fellBack, ejected float64) string {
	return fakePromAll(t, func(q string) string {
		switch {
		case strings.Contains(q, defaultPicksMetric):
			if !strings.Contains(q, `graylb_outcome="fell_back"`) || !strings.Contains(q, `graylb_kind="gray"`) {
				t.Errorf("the picks query reads other picks than the gray ones that fell back: %s", q)
			}
			return byService("svc", fellBack)
		case strings.Contains(q, ejectedMetric):
			return byService("svc", ejected)
		case strings.Contains(q, "_bucket"):
			return bucketVectorOf("svc", histOf(int(grayCalls), func(int) float64 { return 0.02 }), histOf(int(prodCalls), func(int) float64 { return 0.02 }))
		case strings.Contains(q, `outcome="error"`):
			return vector()
		}
		if grayCalls == 0 {
			return vector("prod", fmt.Sprint(prodCalls))
		}
		return vector("gray", fmt.Sprint(grayCalls), "prod", fmt.Sprint(prodCalls))
	}).URL
}

// Outlier detection contains a broken gray build: the callers eject its
// instances within a few calls, and their gray requests fall back to prod,
// counted as prod's calls. The judge counts those fall-backs (otelgraylb's
// picks, outcome fell_back) as failed gray calls: a build none of whose
// gray requests was served is rolled back at the first check with enough
// of them, where it used to wait for gray calls that never came (exit 4).
// A healthy build's few fall-backs (retries after a failed gray call) stay
// within --max-error-increase; callers without the picks metric, or
// --picks-metric "", judge on the calls alone; fall-backs while the service
// has no gray instance in the registry are no failure of the build's.
func TestRolloutCountsFallBacks(t *testing.T) {
	onlyProd := `{"hosts":[{"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{}}]}`
	for _, tc := range []struct {
		name                         string
		grayCalls, fellBack, ejected float64
		more                         []string
		grayGone                     bool // the gray instance leaves the registry as the first step is written
		code                         int
		says                         []string
	}{
		{name: "contained: every gray request fell back", fellBack: 600, ejected: 1, code: exitRollback,
			says: []string{"rolled back at canary 1%", "gray error ratio 100.00% (600 of 600 calls)",
				"the callers ejected 1 gray instance (or paused it): 600 gray requests fell back to prod in the step, counted as failed gray calls"}},
		{name: "contained by two callers", fellBack: 600, ejected: 2, code: exitRollback,
			says: []string{"the callers ejected up to 2 gray instances at once (or paused them)"}},
		{name: "a healthy build's few fall-backs", grayCalls: 500, fellBack: 2, code: exitOK, more: []string{"-o", "json"},
			says: []string{`"outcome": "healthy"`, `"grayFellBack": 2`, "2 gray requests fell back to prod in the step (no gray instance ejected), counted as failed gray calls"}},
		{name: "without the picks metric", fellBack: 600, ejected: 1, more: []string{"--picks-metric", ""}, code: exitNoData,
			says: []string{"gray completed 0 calls in the step"}},
		{name: "no gray instance registered", fellBack: 600, grayGone: true, code: exitNoData,
			says: []string{"600 gray requests that fell back to prod not counted as failed: no gray instance of svc took requests in the registry at "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			f.register("svc", prodAndGray)
			if tc.grayGone {
				f.beforePublish = func() { f.register("svc", onlyProd) }
			}
			prom := promFallBacks(t, tc.grayCalls, 5000, tc.fellBack, tc.ejected)
			code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom, tc.more...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tc.code, out, errOut)
			}
			for _, s := range tc.says {
				if !strings.Contains(out+errOut, s) {
					t.Errorf("the output lacks %q:\n%s%s", s, out, errOut)
				}
			}
		})
	}
}
