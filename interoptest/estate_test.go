package interoptest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb/httpctx"
)

// estate is the Java estate and the graylb services of one run.
type estate struct {
	gw, j001, j000, jsca [2]*javaProc // [prod, gray]; gw[1] unused
	jsca2                *javaProc    // a second prod jsca, for its sibling's graceful stop
	goTag, goPlain       [2]*goInstance
	clientTag            *http.Client // a graylb client keyed gray-tag
	clientPlain          *http.Client // a graylb client with graylb's default keys
}

// grayFlag is the Spring property of a Java instance's kind.
func grayFlag(gray bool) string { return fmt.Sprint(gray) }

// startEstate starts every JVM at once (they start in parallel), the Go
// instances, and waits until the server lists all of them.
func startEstate(t *testing.T) *estate {
	t.Helper()
	gwJar, appsJar := jars(t)
	addr := nacosAddr(t)
	e := &estate{}
	e.gw[0] = startJava(t, gwJar, "jgw", "--interop.services=go-tag,go-drain-clock,go-drain-callers,go-promo,jsca", "--interop.gray-uids=u-gray")
	for i, gray := range []bool{false, true} {
		g := grayFlag(gray)
		// seed 001: gray-tag, letter case counting
		e.j001[i] = startJava(t, appsJar, "j001", "--spring.profiles.active=seed001", "--interop.gray="+g,
			"--interop.gray-header=gray-tag", "--interop.gray-key=gray-tag", "--spring.cloud.nacos.discovery.metadata.gray-tag="+g)
		// seed 000: gray, any letter case
		e.j000[i] = startJava(t, appsJar, "j000", "--spring.profiles.active=seed000", "--interop.gray="+g,
			"--interop.gray-header=gray", "--interop.gray-key=gray", "--spring.cloud.nacos.discovery.metadata.gray="+g)
		// a plain Spring Cloud Alibaba service, its flag as seed 002's deployments set it
		e.jsca[i] = startJava(t, appsJar, "jsca", "--spring.profiles.active=sca", "--interop.gray=${gray:false}", "--gray="+g,
			"--spring.cloud.nacos.discovery.metadata.gray-tag=${gray:false}")
	}
	e.jsca2 = startJava(t, appsJar, "jsca", "--spring.profiles.active=sca", "--interop.gray=${gray:false}", "--gray=false",
		"--spring.cloud.nacos.discovery.metadata.gray-tag=${gray:false}")
	for i, gray := range []bool{false, true} {
		e.goTag[i] = startGo(t, "go-tag", keysTag, gray)
		e.goPlain[i] = startGo(t, "go-plain", keysPlain, gray)
	}
	lbTag, closeTag := newGoLB(t, addr, keysTag, false)
	t.Cleanup(closeTag)
	lbPlain, closePlain := newGoLB(t, addr, keysPlain, false)
	t.Cleanup(closePlain)
	e.clientTag = &http.Client{Transport: httpctx.NewTransport(lbTag), Timeout: 20 * time.Second}
	e.clientPlain = &http.Client{Transport: httpctx.NewTransport(lbPlain), Timeout: 20 * time.Second}
	e.gw[0].ready(t, true)
	for i := range 2 {
		e.j001[i].ready(t, true)
		e.j000[i].ready(t, true)
		e.jsca[i].ready(t, true)
	}
	e.jsca2.ready(t, true)
	for _, svc := range []string{"jgw", "j001", "j000", "jsca", "go-tag", "go-plain"} {
		want := map[string]int{"jgw": 1, "jsca": 3}[svc]
		if want == 0 {
			want = 2
		}
		if !until(30*time.Second, 100*time.Millisecond, func() bool { return len(listed(addr, svc)) == want }) {
			t.Fatalf("%s: %d instances listed, want %d", svc, len(listed(addr, svc)), want)
		}
	}
	return e
}

// chainCase is one chain of hops, entered through a graylb client or a
// Java edge.
type chainCase struct {
	fixture, dir string
	client       *http.Client // nil: url is the Java edge's
	url          string
	header       string // the gray header's name
	hops         int    // hops that answer
}

// run sends n requests of each kind (gray by header, prod without one;
// gray by user too, when user is set) and returns the chains that changed
// kind and the requests that failed.
func (c chainCase) run(ctx context.Context, n int, user string) (chains, wrong, failed int, firstErr error) {
	type req struct {
		h    http.Header
		kind string
	}
	reqs := []req{{http.Header{http.CanonicalHeaderKey(c.header): {"true"}}, "gray"}, {nil, "prod"}}
	if user != "" {
		reqs = append(reqs, req{http.Header{"Uid": {user}}, "gray"})
	}
	cl := c.client
	if cl == nil {
		cl = &http.Client{Timeout: 20 * time.Second}
	}
	for _, r := range reqs {
		for range n {
			chains++
			answer, err := get(ctx, cl, c.url, r.h)
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			ks := kinds(answer)
			bad := len(ks) != c.hops
			for _, k := range ks {
				bad = bad || k != r.kind
			}
			if bad {
				wrong++
				if firstErr == nil {
					firstErr = fmt.Errorf("%w: a %s request answered %q", errWrongKind, r.kind, answer)
				}
			}
		}
	}
	return chains, wrong, failed, firstErr
}

// TestJavaEstate runs graylb services among the seeds' Java services in one
// registry: chains both ways over every fixture, the canonical value at a
// case-sensitive Java hop, then the deployment flows under load.
func TestJavaEstate(t *testing.T) {
	e := startEstate(t)
	gw := e.gw[0].url()
	ctx := context.Background()

	t.Run("chains", func(t *testing.T) {
		cases := []chainCase{
			{"seed 001 (gray-tag, letter case counts)", "Go → Java → Go", e.clientTag, "http://go-tag/chain?next=j001,go-tag", "gray-tag", 3},
			{"seed 001 (gray-tag, letter case counts)", "Java → Go → Java", e.clientTag, "http://j001/chain?next=go-tag,j001", "gray-tag", 3},
			{"seed 000 (gray, filter chain)", "Go → Java → Go", e.clientPlain, "http://go-plain/chain?next=j000,go-plain", "gray", 3},
			{"seed 000 (gray, filter chain)", "Java → Go → Java", e.clientPlain, "http://j000/chain?next=go-plain,j000", "gray", 3},
			{"seed 002 (gateway: gray-tag or a gray user)", "Go → Java → Go", e.clientTag, "http://go-tag/chain?next=jgw/svc/go-tag", "gray-tag", 2},
			{"seed 002 (gateway: gray-tag or a gray user)", "Java → Go → Java", nil, gw + "/svc/go-tag/chain?next=jsca", "gray-tag", 2},
			{"Spring Cloud Alibaba (gray-tag: ${gray:false})", "Go → Java", e.clientTag, "http://go-tag/chain?next=jsca", "gray-tag", 2},
			{"Spring Cloud Alibaba (gray-tag: ${gray:false})", "Java → Go → Java", e.clientTag, "http://j001/chain?next=go-tag,jsca", "gray-tag", 3},
		}
		// Warm the Java callers' caches (their first list is what they
		// keep 35 s): every instance is listed before the first call.
		var lines []string
		total, totalWrong, totalFailed := 0, 0, 0
		for _, c := range cases {
			user := ""
			if c.client == nil {
				user = "u-gray" // seed 002's gray-user list: decides without telling the next hop
			}
			n, wrong, failed, err := c.run(ctx, 25, user)
			total, totalWrong, totalFailed = total+n, totalWrong+wrong, totalFailed+failed
			lines = append(lines, fmt.Sprintf("| %s | %s | %d | %d | %d |", c.fixture, c.dir, n, wrong, failed))
			if wrong != 0 || failed != 0 {
				t.Errorf("%s, %s: %d chains, %d changed kind, %d failed; first: %v", c.fixture, c.dir, n, wrong, failed, err)
			}
		}
		lines = append(lines, fmt.Sprintf("| all | | %d | %d | %d |", total, totalWrong, totalFailed))
		reliabilityOut(t, "chains", lines...)
	})

	t.Run("canonical value at a case-sensitive hop", func(t *testing.T) {
		// gray-tag: TRUE reaches a Go hop; it writes true for seed 001's
		// hop, which compares with "true" letter for letter.
		c := chainCase{"seed 001", "Go → Java → Go", e.clientTag, "http://go-tag/chain?next=j001,go-tag", "gray-tag", 3}
		changed, failed := 0, 0
		for range 100 {
			answer, err := get(ctx, c.client, c.url, http.Header{"Gray-Tag": {"TRUE"}})
			if err != nil {
				failed++
				continue
			}
			for _, k := range kinds(answer) {
				if k != "gray" {
					changed++
					break
				}
			}
		}
		reliabilityOut(t, "canonical", fmt.Sprintf("| `gray-tag: TRUE` into a Go hop, then seed 001's case-sensitive hop | 100 | %d | %d |", changed, failed))
		if changed != 0 || failed != 0 {
			t.Errorf("of 100 chains entered with gray-tag: TRUE, %d changed kind at the Java hop, %d failed", changed, failed)
		}
	})

	t.Run("flows", func(t *testing.T) { flows(t, e) })
}

// load sends idempotent requests to each of urls from workers goroutines
// each, until stop is closed, counting each url's requests and failures.
type load struct {
	mu       sync.Mutex
	sent     map[string]int
	failed   map[string]int
	wrong    map[string]int
	seen     map[string]map[string]bool // answers' first hop, by url name
	firstErr map[string]error
	wg       sync.WaitGroup
	stop     chan struct{}
}

// target is one url of a load: its header, and the kind its chains must
// have ("" for any).
type target struct {
	url    string
	header http.Header
	kind   string
	client *http.Client
}

func startLoad(targets map[string]target) *load {
	l := &load{sent: map[string]int{}, failed: map[string]int{}, wrong: map[string]int{}, seen: map[string]map[string]bool{},
		firstErr: map[string]error{}, stop: make(chan struct{})}
	for name, tg := range targets {
		l.seen[name] = map[string]bool{}
		for range 2 {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				cl := tg.client
				if cl == nil {
					cl = &http.Client{Timeout: 20 * time.Second}
				}
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-l.stop:
						return
					case <-tick.C:
					}
					answer, err := get(context.Background(), cl, tg.url, tg.header)
					l.mu.Lock()
					l.sent[name]++
					if err != nil {
						l.failed[name]++
						if l.firstErr[name] == nil {
							l.firstErr[name] = err
						}
					} else {
						first, _, _ := strings.Cut(answer, ",")
						l.seen[name][first] = true
						for _, k := range kinds(answer) {
							if tg.kind != "" && k != tg.kind {
								l.wrong[name]++
								if l.firstErr[name] == nil {
									l.firstErr[name] = fmt.Errorf("%w: %q", errWrongKind, answer)
								}
								break
							}
						}
					}
					l.mu.Unlock()
				}
			}()
		}
	}
	return l
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

func (l *load) counts(name string) (sent, failed, wrong int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent[name], l.failed[name], l.wrong[name], l.firstErr[name]
}

// saw reports whether name's answers came from a first hop named hop.
func (l *load) saw(name, hop string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[name][hop]
}
