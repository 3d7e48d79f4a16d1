package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// shadowVector is Prometheus' answer to a shadow query: label values and
// counts in pairs, of service.
func shadowVector(service, label string, pairs ...any) string {
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, fmt.Sprintf(`{"metric":{"graylb_service":%q,%q:%q},"value":[1700000000.1,%q]}`, service, label, pairs[i], fmt.Sprint(pairs[i+1])))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(parts, ",") + `]}}`
}

// status shows the shadow share and, given Prometheus, the callers' live
// counts of the copies; without it, it says so.
func TestStatusShowsTheShadowShareAndItsCounts(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"shadowPercent": 10}`)
	f.register("user-service", prodAndGray)
	var queries []string
	prom := fakeProm(t, func(q string) string {
		queries = append(queries, q)
		if strings.HasPrefix(q, "sum by (graylb_service, graylb_shadow_outcome)") {
			return shadowVector("user-service", "graylb_shadow_outcome", "same", 950, "differs", 40, "failed", 10, "dropped", 3, "blocked-write", 7)
		}
		return shadowVector("user-service", "graylb_shadow_by", "status", 10, "body", 30, "latency", 2)
	})

	code, out, errOut := runCLI(t, nil, "status", "user-service", "--nacos", f.addr())
	if code != exitOK || !strings.Contains(out, "shadow 10%") ||
		!strings.Contains(out, "shadow: 10% of prod requests mirrored to the gray build; live counts not read: no Prometheus given (--prometheus or $GRAYLB_PROMETHEUS)") {
		t.Fatalf("without Prometheus: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, map[string]string{envPrometheus: prom.URL}, "status", "user-service", "--nacos", f.addr())
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`shadow: 10% of prod requests mirrored to the gray build; copies in the last 5m0s \(Prometheus at http://127\.0\.0\.1:\d+\):`,
		`SERVICE\s+SAME\s+DIFFERS \(STATUS/LATENCY/BODY\)\s+FAILED\s+DROPPED\s+WRITES BLOCKED`,
		`user-service\s+950\s+40 \(10/2/30\)\s+10\s+3\s+7`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "no rule sends requests") {
		t.Errorf("the shadow copies reach the gray instance, yet status warns none does:\n%s", out)
	}
	if len(queries) != 2 || !strings.Contains(queries[0], `graylb_shadow_total{graylb_service="user-service"}`) {
		t.Errorf("queries %q", queries)
	}

	// Every service without SERVICE; JSON.
	queries = nil
	code, out, _ = runCLI(t, nil, "status", "--nacos", f.addr(), "--prometheus", prom.URL, "-o", "json")
	var rep struct {
		Shadow shadowStatus `json:"shadow"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Shadow.Percent != 10 || len(rep.Shadow.Services) != 1 ||
		rep.Shadow.Services[0].Same != 950 || rep.Shadow.Services[0].ByBody != 30 {
		t.Fatalf("json: exit %d, %+v:\n%s", code, rep.Shadow, out)
	}
	if !strings.Contains(queries[0], `graylb_shadow_total{graylb_service!=""}`) {
		t.Errorf("queries %q", queries)
	}

	// Prometheus unreachable: status still answers, saying why there are no counts.
	dead := httptest.NewServer(nil)
	dead.Close()
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{}`)
	code, out, errOut = runCLI(t, nil, "status", "user-service", "--nacos", f.addr(), "--prometheus", dead.URL)
	if code != exitOK || !strings.Contains(out, "shadow: off (shadowPercent 0); live counts not read: prometheus unreachable") {
		t.Fatalf("unreachable: exit %d:\n%s%s", code, out, errOut)
	}
}
