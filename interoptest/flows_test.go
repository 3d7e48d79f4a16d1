package interoptest

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// flows runs the deployment flows across the languages under load.
func flows(t *testing.T, e *estate) {
	gw := e.gw[0].url()
	t.Run("a Go instance's SIGTERM behind the Java entries", func(t *testing.T) {
		if os.Getenv("GRAYLB_INTEROP_COMPARE") != "" {
			// The drain of before: the drain wait alone (2 s), the
			// figures RELIABILITY.md compares with.
			goSIGTERM(t, e, gw, "clock", "go-drain")
		}
		goSIGTERM(t, e, gw, "callers", "go-drain")
	})
	t.Run("a Java service's graceful stop behind graylb", func(t *testing.T) {
		l := startLoad(map[string]target{"graylb → jsca": {url: "http://jsca/chain", kind: "prod", client: e.clientTag}})
		time.Sleep(2 * time.Second) // load before the stop
		start := time.Now()
		e.jsca[0].stop(t)
		took := time.Since(start)
		time.Sleep(3 * time.Second) // load after it
		l.end()
		sent, failed, wrong, err := l.counts("graylb → jsca")
		reliabilityOut(t, "java-stop", fmt.Sprintf("| Java graceful stop (SIGTERM of a Spring Cloud Alibaba instance, %.1f s to exit) | graylb's Transport over Nacos | %d | %d | %d |",
			took.Seconds(), sent, failed, wrong))
		if failed != 0 || wrong != 0 {
			t.Errorf("%d of %d requests failed, %d wrong kind; first: %v", failed, sent, wrong, err)
		}
	})
	t.Run("a gray Go build promoted behind the gateway", func(t *testing.T) { promote(t, gw) })
}

// goSIGTERM stops one of two prod graylb instances of svc with SIGTERM
// under load through seed 002's gateway and seed 001's caller, both
// caching their lists (Spring's default: 35 s), and counts the failed
// requests through each.
func goSIGTERM(t *testing.T, e *estate, gw, drain, svc string) {
	svc = svc + "-" + drain
	a := startChild(t, childSpec{Name: svc, Header: "gray-tag", Key: "gray-tag", Drain: drain})
	b := startChild(t, childSpec{Name: svc, Header: "gray-tag", Key: "gray-tag", Drain: drain})
	targets := map[string]target{
		"seed 002's gateway": {url: gw + "/svc/" + svc + "/chain", kind: "prod"},
		"seed 001's caller":  {url: e.j001[0].url() + "/chain?next=" + svc, kind: "prod"},
	}
	hop := func(c *child) string { return svc + ":" + strconv.Itoa(c.port) + "@prod" }
	warm := startLoad(targets)
	if !until(60*time.Second, 100*time.Millisecond, func() bool {
		return seesBoth(warm, "seed 002's gateway", hop(a), hop(b)) && seesChain(e, targets["seed 001's caller"].url, hop(a), hop(b))
	}) {
		warm.end()
		t.Fatalf("the Java entries did not reach both instances within 60 s")
	}
	warm.end()
	l := startLoad(targets)
	time.Sleep(2 * time.Second) // load before the stop
	start := time.Now()
	said := a.sigterm(t)
	took := time.Since(start)
	after := 3 * time.Second
	if drain == "clock" {
		after = 40 * time.Second // until every cache that held it expired (35 s)
	}
	time.Sleep(after) // load after it
	l.end()
	var lines []string
	for _, name := range []string{"seed 002's gateway", "seed 001's caller"} {
		sent, failed, wrong, err := l.counts(name)
		lines = append(lines, fmt.Sprintf("| Go SIGTERM, drain %s (stop took %.1f s: %s) | %s | %d | %d | %d |", drain, took.Seconds(), said, name, sent, failed, wrong))
		if drain == "callers" && (failed != 0 || wrong != 0) {
			t.Errorf("through %s: %d of %d requests failed, %d wrong kind; first: %v", name, failed, sent, wrong, err)
		}
	}
	reliabilityOut(t, "go-sigterm-"+drain, lines...)
	b.sigterm(t)
}

// seesBoth reports whether name's load reached both hops.
func seesBoth(l *load, name, a, b string) bool { return l.saw(name, a) && l.saw(name, b) }

// seesChain reports whether a few requests to u reached both a and b as
// their second hop.
func seesChain(e *estate, u, a, b string) bool {
	seen := map[string]bool{}
	for range 20 {
		answer, err := get(t0ctx, http.DefaultClient, u, nil)
		if err != nil {
			continue
		}
		hops := splitHops(answer)
		if len(hops) > 1 {
			seen[hops[1]] = true
		}
	}
	return seen[a] && seen[b]
}

// promote promotes a gray graylb build to prod behind seed 002's gateway
// under load of prod and gray requests: the gray build starts as prod,
// then the old prod and the gray instance stop (SIGTERM).
func promote(t *testing.T, gw string) {
	svc := "go-promo"
	p := startChild(t, childSpec{Name: svc, Header: "gray-tag", Key: "gray-tag", Drain: "callers"})
	g := startChild(t, childSpec{Name: svc, Gray: true, Header: "gray-tag", Key: "gray-tag", Drain: "callers"})
	targets := map[string]target{
		"prod requests": {url: gw + "/svc/" + svc + "/chain", kind: "prod"},
		"gray requests": {url: gw + "/svc/" + svc + "/chain", header: http.Header{"Gray-Tag": {"true"}}},
	}
	l := startLoad(targets)
	time.Sleep(2 * time.Second) // load before the promotion
	start := time.Now()
	promoted := startChild(t, childSpec{Name: svc, Header: "gray-tag", Key: "gray-tag", Drain: "callers"}) // the gray build, as prod
	var wg sync.WaitGroup
	var saidP, saidG string
	wg.Add(2)
	go func() { defer wg.Done(); saidP = p.sigterm(t) }()
	go func() { defer wg.Done(); saidG = g.sigterm(t) }()
	wg.Wait()
	took := time.Since(start)
	time.Sleep(3 * time.Second) // load after it
	l.end()
	var lines []string
	for _, name := range []string{"prod requests", "gray requests"} {
		sent, failed, wrong, err := l.counts(name)
		lines = append(lines, fmt.Sprintf("| promotion through seed 002's gateway (%.1f s; old prod: %s; gray: %s) | %s | %d | %d | %d |", took.Seconds(), saidP, saidG, name, sent, failed, wrong))
		if failed != 0 || wrong != 0 {
			t.Errorf("%s: %d of %d failed, %d wrong kind; first: %v", name, failed, sent, wrong, err)
		}
	}
	reliabilityOut(t, "promotion", lines...)
	promoted.sigterm(t)
}
