package badbuildtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startPrometheus runs a Prometheus server of the test's own scraping
// targets every second and returns its base URL once it is ready. (The
// same as cmd/graylb's tests start, which another module's tests cannot
// share.)
func startPrometheus(t *testing.T, targets ...string) string {
	t.Helper()
	bin := need(t, "prometheus")
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n" +
		"scrape_configs:\n  - job_name: callers\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n" +
		"    static_configs:\n      - targets: [" + strings.Join(quoted, ", ") + "]\n"
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	p := startProc(t, "prometheus", bin, nil, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	base := "http://" + addr
	waitFor(t, 60*time.Second, "prometheus ready on "+addr, func() bool {
		if !p.running() {
			t.Fatalf("prometheus exited at start-up:\n%s", p.out)
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// scraped reports whether Prometheus at base has scraped every target
// (up is 1 for each).
func scraped(base string, targets int) bool {
	resp, err := http.Get(base + "/api/v1/query?query=up")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var ans struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&ans) != nil || len(ans.Data.Result) != targets {
		return false
	}
	for _, r := range ans.Data.Result {
		if len(r.Value) != 2 || r.Value[1] != "1" {
			return false
		}
	}
	return true
}

// query runs an instant PromQL query whose answer is one number (a
// vector of one sample, or none: 0).
func query(base, q string) (float64, error) {
	resp, err := http.Get(base + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var ans struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || ans.Status != "success" {
		return 0, fmt.Errorf("query %s: status %q, %v", q, ans.Status, err)
	}
	switch len(ans.Data.Result) {
	case 0:
		return 0, nil
	case 1:
		if v, ok := ans.Data.Result[0].Value[1].(string); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("query %s: %d series", q, len(ans.Data.Result))
}

// evidence is what the callers' graylb metrics (otelgraylb) showed of
// the gray instances over a window: how many were ejected at most, how
// many gray requests' picks fell back to prod of all gray picks, and how
// often the number of routable gray instances changed.
type evidence struct {
	ejectedMax, fellBack, grayPicks, countChanges float64
}

func (e evidence) String() string {
	return fmt.Sprintf("gray instances ejected at most: %.0f; gray picks that fell back: %.0f of %.0f; changes of the gray instance count: %.0f",
		e.ejectedMax, e.fellBack, e.grayPicks, e.countChanges)
}

// callersEvidence reads evidence for service over the last window.
func callersEvidence(base, service string, window time.Duration) (evidence, error) {
	sel := fmt.Sprintf(`graylb_service=%q,graylb_kind="gray"`, service)
	w := fmt.Sprintf("[%ds]", int(window.Seconds()+0.999))
	var e evidence
	for _, q := range []struct {
		v *float64
		q string
	}{
		{&e.ejectedMax, "max(max_over_time(graylb_instances_ejected{" + sel + "}" + w + "))"},
		{&e.fellBack, "sum(increase(graylb_picks_total{" + sel + `,graylb_outcome="fell_back"}` + w + "))"},
		{&e.grayPicks, "sum(increase(graylb_picks_total{" + sel + "}" + w + "))"},
		{&e.countChanges, "sum(changes(graylb_instances{" + sel + "}" + w + "))"},
	} {
		v, err := query(base, q.q)
		if err != nil {
			return e, err
		}
		*q.v = v
	}
	return e, nil
}
