// Command quickstart shows full-link gray routing with graylb and nothing
// but Go: an in-memory registry and real HTTP servers on loopback.
//
//	client ─▶ edge gateway ─▶ user-service (2 prod, 1 gray) ─▶ order-service (1 prod, 1 gray)
//
// Every service calls the next through graylb's RoundTripper, behind its
// propagation middleware. Each scenario sends a few requests through the
// edge and prints which instance served each hop; a summary then checks
// the invariants of graylb's gray rules on everything that happened.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
)

// instance is one running service instance.
type instance struct {
	name    string // user-prod-1
	service string // user-service
	gray    bool
	next    string // the service it calls, "" for the last hop
	lb      *graylb.LoadBalancer
	srv     *http.Server
	addr    string
}

type world struct {
	reg       *graylb.Registry
	instances map[string]*instance // by name
	byAddr    map[string]*instance
	lbs       []*graylb.LoadBalancer
	edge      string // edge URL
	client    *http.Client
	log       []record
}

// record is one request as it went through the hops.
type record struct {
	scenario string
	kind     graylb.Kind // what the edge routed it as
	hops     []*instance
	grayLeft map[string]bool // per service: had a gray instance when sent
	user     string
}

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `Usage: quickstart

Runs graylb's full-link gray routing demo and exits: an in-memory registry and
real HTTP servers on free loopback ports (edge -> user-service -> order-service),
a few scenarios (gray header, gray user, an instance removed, rollback, canary),
a table per scenario of the instance that served each hop, then a check of the
gray rule's invariants over every request (exit status 1 if one fails).
It needs nothing but Go and takes no flags; make demo runs it.
`)
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	start := time.Now()
	// The demo removes instances on purpose; keep graylb's warnings quiet.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	w, err := newWorld()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
	defer w.close()

	w.scenario("no header", 4, func(int) (http.Header, string) { return nil, "" })
	w.scenario("gray: true", 4, header("true"))
	w.scenario("gray: TRUE", 2, header("TRUE"))
	w.scenario("gray: false", 2, header("false"))
	w.scenario("gray: junk", 2, header("junk"))
	w.setRules(graylb.Rules{GrayUsers: []string{"alice"}})
	w.scenario("uid: alice (a gray user), no gray header", 2, func(int) (http.Header, string) {
		return http.Header{"Uid": {"alice"}}, "alice"
	})
	w.scenario("uid: bob (not a gray user)", 2, func(int) (http.Header, string) {
		return http.Header{"Uid": {"bob"}}, "bob"
	})
	w.setRules(graylb.Rules{})
	w.scenario("gray: true, then order-gray is removed mid-run", 6, func(i int) (http.Header, string) {
		if i == 3 {
			w.deregister("order-gray")
		}
		return http.Header{"Gray": {"true"}}, ""
	})
	w.register("order-gray")
	w.setRules(graylb.Rules{Closed: true})
	w.scenario("rollback (closed: true), gray: true: still gray requests, served by prod at every hop", 3, header("true"))
	w.setRules(graylb.Rules{CanaryPercent: 20})
	w.canary(100)
	w.setRules(graylb.Rules{})

	ok := w.summary()
	fmt.Printf("finished in %v\n", time.Since(start).Round(time.Millisecond))
	if !ok {
		os.Exit(1)
	}
}

func header(v string) func(int) (http.Header, string) {
	return func(int) (http.Header, string) { return http.Header{"Gray": {v}}, "" }
}

func newWorld() (*world, error) {
	w := &world{reg: graylb.NewRegistry(), instances: map[string]*instance{}, byAddr: map[string]*instance{}}
	specs := []struct {
		name, service, next string
		gray                bool
	}{
		{"order-prod", "order-service", "", false},
		{"order-gray", "order-service", "", true},
		{"user-prod-1", "user-service", "order-service", false},
		{"user-prod-2", "user-service", "order-service", false},
		{"user-gray", "user-service", "order-service", true},
		{"edge", "edge", "user-service", false},
	}
	for _, s := range specs {
		in, err := w.start(s.name, s.service, s.next, s.gray)
		if err != nil {
			return nil, err
		}
		if s.name == "edge" {
			w.edge = "http://" + in.addr + "/"
			continue
		}
		w.register(in.name)
	}
	w.client = &http.Client{Timeout: 5 * time.Second}
	return w, nil
}

func hostPort(addr string) (string, int) {
	h, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return h, port
}

// start runs one instance: middleware, then a handler that calls the next
// service through graylb and reports "name[gray header it received]".
func (w *world) start(name, service, next string, gray bool) (*instance, error) {
	lb, err := graylb.New(w.reg, graylb.WithSelfGray(gray))
	if err != nil {
		return nil, err
	}
	w.lbs = append(w.lbs, lb)
	in := &instance{name: name, service: service, gray: gray, next: next, lb: lb}
	client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 5 * time.Second}
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		me := name + "[" + r.Header.Get("gray") + "]"
		if next == "" {
			io.WriteString(rw, me)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+next+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(rw, me+">error: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if name == "edge" { // the edge reports what it routed as
			rw.Write(b)
			return
		}
		io.WriteString(rw, me+">"+string(b))
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	in.addr = lis.Addr().String()
	in.srv = &http.Server{Handler: httpctx.Middleware(lb)(h), ReadHeaderTimeout: 5 * time.Second}
	go in.srv.Serve(lis)
	w.instances[name] = in
	w.byAddr[in.addr] = in
	return in, nil
}

func (w *world) close() {
	for _, in := range w.instances {
		in.srv.Close()
	}
	for _, lb := range w.lbs {
		lb.Close()
	}
}

func (w *world) setRules(r graylb.Rules) {
	for _, lb := range w.lbs {
		if err := lb.SetRules(r); err != nil {
			fmt.Fprintln(os.Stderr, "rules:", err)
			os.Exit(1)
		}
	}
}

func (w *world) deregister(name string) {
	in := w.instances[name]
	if err := w.reg.Deregister(in.service, in.addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func (w *world) register(name string) {
	in := w.instances[name]
	h, p := hostPort(in.addr)
	md := map[string]string{}
	if in.gray {
		md["gray"] = "true"
	}
	if err := w.reg.Register(graylb.NewInstance(in.service, h, p, md)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// grayLeft reports, per service, whether it has a gray instance now.
func (w *world) grayLeft() map[string]bool {
	out := map[string]bool{}
	for _, svc := range []string{"user-service", "order-service"} {
		list, _ := w.reg.Instances(context.Background(), svc)
		for _, in := range list {
			if graylb.IsGray(in.Metadata["gray"]) {
				out[svc] = true
			}
		}
	}
	return out
}

// send sends one request through the edge and records its hops.
func (w *world) send(scenario string, h http.Header, user string) (record, string, error) {
	rec := record{scenario: scenario, grayLeft: w.grayLeft(), user: user}
	req, _ := http.NewRequest(http.MethodGet, w.edge, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return rec, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	if resp.StatusCode != http.StatusOK {
		return rec, body, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	for i, hop := range strings.Split(body, ">") {
		name, got, _ := strings.Cut(strings.TrimSuffix(hop, "]"), "[")
		in := w.instances[name]
		if in == nil {
			return rec, body, fmt.Errorf("unknown hop %q", hop)
		}
		if i == 0 {
			rec.kind = graylb.KindOf(got)
		}
		rec.hops = append(rec.hops, in)
	}
	return rec, body, nil
}

func (w *world) scenario(title string, n int, req func(i int) (http.Header, string)) {
	fmt.Printf("\n== %s\n", title)
	fmt.Printf("   %-3s %-24s %-13s %-26s %-26s\n", "#", "request headers", "request kind", "user-service served by", "order-service served by")
	for i := 0; i < n; i++ {
		h, user := req(i)
		rec, body, err := w.send(title, h, user)
		if err != nil {
			fmt.Printf("   %-3d %-24s error: %v %s\n", i+1, showHeaders(h), err, body)
			rec.hops = nil
			w.log = append(w.log, rec)
			continue
		}
		w.log = append(w.log, rec)
		fmt.Printf("   %-3d %-24s %-13s %-26s %-26s\n", i+1, showHeaders(h), rec.kind, served(rec.hops[0]), served(rec.hops[1]))
	}
}

// served names the instance that served a hop, with its kind.
func served(in *instance) string {
	if in.gray {
		return in.name + " (gray)"
	}
	return in.name + " (prod)"
}

func (w *world) canary(users int) {
	title := fmt.Sprintf("canary 20%% over %d users (uid sticky), 2 requests each", users)
	fmt.Printf("\n== %s\n", title)
	gray := 0
	for u := 0; u < users; u++ {
		uid := "user-" + strconv.Itoa(u)
		var sides []bool
		for k := 0; k < 2; k++ {
			rec, _, err := w.send(title, http.Header{"Uid": {uid}}, uid)
			if err != nil {
				fmt.Printf("   %s: error %v\n", uid, err)
				continue
			}
			w.log = append(w.log, rec)
			sides = append(sides, rec.kind == graylb.Gray)
		}
		if len(sides) > 0 && sides[0] {
			gray++
		}
		if u < 6 {
			fmt.Printf("   %-8s gray=%v\n", uid, sides)
		}
	}
	fmt.Printf("   ... %d of %d users went gray (target 20%%)\n", gray, users)
}

func showHeaders(h http.Header) string {
	if len(h) == 0 {
		return "(none)"
	}
	var parts []string
	for k, v := range h {
		parts = append(parts, strings.ToLower(k)+": "+v[0])
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// summary checks the invariants on every recorded request.
func (w *world) summary() bool {
	var violations []string
	users := map[string]graylb.Kind{}
	counts := map[string]int{}
	for i, r := range w.log {
		if r.hops == nil {
			violations = append(violations, fmt.Sprintf("request %d (%s) failed", i+1, r.scenario))
			continue
		}
		counts[r.kind.String()]++
		for _, hop := range r.hops {
			switch {
			case r.kind == graylb.Prod && hop.gray:
				violations = append(violations, fmt.Sprintf("request %d (%s): prod request reached gray %s", i+1, r.scenario, hop.name))
			case strings.HasPrefix(r.scenario, "rollback") && hop.gray:
				violations = append(violations, fmt.Sprintf("request %d (%s): closed, yet reached gray %s", i+1, r.scenario, hop.name))
			case r.kind == graylb.Gray && !strings.HasPrefix(r.scenario, "rollback") && r.grayLeft[hop.service] && !hop.gray:
				violations = append(violations, fmt.Sprintf("request %d (%s): gray request reached prod %s while a gray instance existed", i+1, r.scenario, hop.name))
			}
		}
		if r.user != "" && strings.HasPrefix(r.scenario, "canary") {
			if k, seen := users[r.user]; seen && k != r.kind {
				violations = append(violations, fmt.Sprintf("canary: user %s changed side", r.user))
			}
			users[r.user] = r.kind
		}
	}
	fmt.Printf("\n== summary\n   requests: %d (%d prod, %d gray), hops checked: %d\n",
		len(w.log), counts["prod"], counts["gray"], 2*len(w.log))
	fmt.Println("   invariants: a prod request never reaches a gray instance; a gray request reaches gray")
	fmt.Println("   wherever the service has one; closed sends nobody to gray; a canary user keeps one side")
	if len(violations) == 0 {
		fmt.Println("invariants: PASS")
		return true
	}
	for _, v := range violations {
		fmt.Println("   violation:", v)
	}
	fmt.Println("invariants: FAIL")
	return false
}
