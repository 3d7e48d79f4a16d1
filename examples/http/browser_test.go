package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"golang.org/x/net/html"
)

// chromium returns the path of a headless-capable Chromium, skipping the
// test where there is none (scripts/browser-test.sh installs it; CI
// always has it, and there a missing browser fails the test).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs it")
	}
	t.Skip("chromium is not installed: run scripts/browser-test.sh (installs it) to load the debug page in a real browser")
	return ""
}

// browse runs headless Chromium with args and the URL, bounded in time.
func browse(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Nothing but the page: no network of the browser's own (updates,
	// sync, QUIC probes), a profile of its own.
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// TestDebugPageInBrowser loads the running example's debug page in
// headless Chromium and checks the DOM it rendered: both instances with
// their kinds and subsets, the pick counters, and hostile metadata shown as
// text, never run. With GRAYLB_SCREENSHOT=path it also saves a screenshot.
func TestDebugPageInBrowser(t *testing.T) {
	bin := chromium(t)
	d, err := start(config{gateway: "127.0.0.1:0", prod: "127.0.0.1:0", gray: "127.0.0.1:0", register: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	for _, gray := range []string{"", "true", "true", "false"} {
		req, _ := http.NewRequest(http.MethodGet, d.gateway+"/", nil)
		if gray != "" {
			req.Header.Set("gray", gray)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if err := d.lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}, CanaryPercent: 5}); err != nil {
		t.Fatal(err)
	}
	_ = d.lb.SetRules(graylb.Rules{CanaryPercent: 250}) // refused, shown as the last refusal
	// Picks of names nothing was registered under (a typo, a service not
	// deployed here): counted, and the last names listed.
	unrouted := []string{"order-servce", "payment-service", "order-servce"}
	for i, name := range unrouted {
		ctx := context.Background()
		if i == 1 {
			ctx = graylb.WithValue(ctx, "gray", "true")
		}
		if _, err := d.lb.Pick(ctx, name); err == nil {
			t.Fatalf("%s was picked", name)
		}
	}
	page := d.gateway + "/debug/graylb"
	if path := os.Getenv("GRAYLB_SCREENSHOT"); path != "" {
		browse(t, bin, page, "--hide-scrollbars", "--window-size=1280,1120", "--screenshot="+path)
		t.Logf("screenshot: %s", path)
	}

	// An instance whose metadata tries to run a script.
	reg, ok := d.registry.(*graylb.Registry)
	if !ok {
		t.Skip("not on the in-memory registry")
	}
	hostile := map[string]string{"note": `<script>document.title="owned"</script>`, "<b>key</b>": `"><img src=x onerror=alert(1)>`}
	if err := reg.Register(graylb.NewInstance("legacy-service", "127.0.0.1", 9, hostile)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.lb.Pick(context.Background(), "legacy-service"); err != nil {
		t.Fatal(err)
	}

	doc, err := html.Parse(strings.NewReader(browse(t, bin, page, "--dump-dom")))
	if err != nil {
		t.Fatal(err)
	}
	var (
		title    string
		scripts  int
		images   int
		kinds    = map[string][]string{} // service → kinds of its instance rows
		subsets  []string
		metadata []string
		byID     = map[string]string{} // text of the cells with an id
		names    []string              // the names not routed, as listed
	)
	var walk func(n *html.Node, service string)
	walk = func(n *html.Node, service string) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "title":
				title = text(n)
			case "script":
				scripts++
			case "img":
				images++
			case "section":
				service = attr(n, "data-service")
			case "td":
				switch cls := attr(n, "class"); {
				case strings.HasPrefix(cls, "kind "):
					kinds[service] = append(kinds[service], text(n))
				case cls == "subsets" && service == "user-service":
					subsets = append(subsets, text(n))
				case strings.HasPrefix(cls, "metadata") && service == "legacy-service":
					metadata = append(metadata, text(n))
				}
				if id := attr(n, "id"); id != "" {
					byID[id] = text(n)
				}
				if attr(n, "class") == "mono name" {
					names = append(names, text(n))
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, service)
		}
	}
	walk(doc, "")
	if title != "graylb debug" {
		t.Errorf("title %q: a script ran or the page did not load", title)
	}
	if scripts != 0 || images != 0 {
		t.Errorf("%d script and %d img elements in the rendered page", scripts, images)
	}
	if got := strings.Join(kinds["user-service"], ","); got != "prod,gray" {
		t.Errorf("user-service kinds %q, want prod,gray", got)
	}
	if got := strings.Join(subsets, ","); got != "prod,gray" {
		t.Errorf("user-service subsets %q", got)
	}
	if len(metadata) != 1 || !strings.Contains(metadata[0], `note=<script>document.title="owned"</script>`) ||
		!strings.Contains(metadata[0], `<b>key</b>="><img src=x onerror=alert(1)>`) {
		t.Errorf("hostile metadata not shown as text: %q", metadata)
	}
	if refused := byID["rules-last-refused"]; !strings.Contains(refused, "canaryPercent 250") {
		t.Errorf("last refusal %q", refused)
	}
	if got := byID["unrouted-failed"]; got != "3" {
		t.Errorf("failed picks of names not routed %q, want 3", got)
	}
	if got := strings.Join(names, ","); got != "order-servce,payment-service" {
		t.Errorf("names not routed %q, want the last first, each once", got)
	}
	if got := byID["rules-source"]; got != "program" {
		t.Errorf("rules source %q", got)
	}
	if got := byID["ejected-now"]; got != "0" {
		t.Errorf("ejected now %q: the ejection section is missing", got)
	}
	if got := byID["cache-applied"]; got == "" || got == "0" {
		t.Errorf("updates applied %q while instances are live", got)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	var f func(*html.Node)
	f = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			f(c)
		}
	}
	f(n)
	return strings.TrimSpace(b.String())
}
