package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestMetricsScrape starts the example with -metrics, sends prod and gray
// requests through the gateway, and scrapes /metrics over HTTP as
// Prometheus would: the picks by service, kind and outcome are there,
// with the instances by kind.
func TestMetricsScrape(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out syncBuffer
	go func() {
		done <- run(ctx, config{gateway: "127.0.0.1:0", prod: "127.0.0.1:0", gray: "127.0.0.1:0", register: true, metrics: true}, &out)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "Ctrl-C stops") })
	gw := regexp.MustCompile(`gateway on (http://\S+)`).FindStringSubmatch(out.String())
	if gw == nil {
		t.Fatalf("no gateway address in:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "curl -s "+gw[1]+"/metrics") {
		t.Errorf("no metrics command in:\n%s", out.String())
	}
	get := func(path, gray string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, gw[1]+path, nil)
		if gray != "" {
			req.Header.Set("gray", gray)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, gray := range []string{"", "", "", "true", "true"} {
		if code, body := get("/", gray); code != http.StatusOK {
			t.Fatalf("gray %q: %d %s", gray, code, body)
		}
	}

	code, page := get("/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^# TYPE graylb_picks_total counter$`),
		regexp.MustCompile(`(?m)^graylb_picks_total\{graylb_kind="prod",graylb_outcome="selected",graylb_service="user-service",[^}]*\} 3$`),
		regexp.MustCompile(`(?m)^graylb_picks_total\{graylb_kind="gray",graylb_outcome="selected",graylb_service="user-service",[^}]*\} 2$`),
		regexp.MustCompile(`(?m)^graylb_instances\{graylb_kind="gray",graylb_service="user-service",[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^graylb_instances\{graylb_kind="prod",graylb_service="user-service",[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^graylb_rules_refused_total\{[^}]*\} 0$`),
	} {
		if !want.MatchString(page) {
			t.Errorf("no line matching %s in:\n%s", want, page)
		}
	}
	// The debug page counts the same picks (graylb.WithObserver feeds both).
	if _, js := get("/debug/graylb?format=json", ""); !regexp.MustCompile(`"selected": 3`).MatchString(js) {
		t.Errorf("debug page without the 3 prod picks:\n%s", js)
	}
}

// TestUnroutedFailuresScraped: picks of names that never had an instance
// fail, and the failures show: in /metrics as one failed series whatever
// the names, and on the debug page with the last names. Before, after 20
// such failures neither showed any.
func TestUnroutedFailuresScraped(t *testing.T) {
	d, err := start(config{gateway: "127.0.0.1:0", prod: "127.0.0.1:0", gray: "127.0.0.1:0", register: true, metrics: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	for i := 0; i < 20; i++ {
		if _, err := d.lb.Pick(context.Background(), fmt.Sprintf("nobody-%d", i)); err == nil {
			t.Fatal("a name nothing was registered under was picked")
		}
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(d.gateway + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	want := regexp.MustCompile(`(?m)^graylb_picks_total\{graylb_kind="prod",graylb_outcome="failed",graylb_service="<unrouted>",[^}]*\} 20$`)
	if page := get("/metrics"); !want.MatchString(page) {
		t.Errorf("no line matching %s in:\n%s", want, page)
	}
	js := get("/debug/graylb?format=json")
	for _, w := range []string{`"failed": 20`, `"service": "nobody-19"`, `"service": "nobody-12"`} {
		if !strings.Contains(js, w) {
			t.Errorf("debug page without %s:\n%s", w, js)
		}
	}
	if strings.Contains(js, `"service": "nobody-11"`) {
		t.Errorf("debug page keeps more than the last 8 names:\n%s", js)
	}
}
