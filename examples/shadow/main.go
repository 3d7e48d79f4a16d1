// Command shadow shows graylb's dark launch with nothing but Go: an
// in-memory registry and real HTTP servers on loopback.
//
//	client ─▶ edge ─▶ orders (1 prod, 1 gray) ─POST─▶ ledger (1 prod)
//
// The rules mirror the prod GETs the edge sends orders (shadowPercent 100)
// to the gray build of orders: its answers are compared with prod's and
// never returned. Reading an order writes a view to the ledger (a POST):
// the prod instance's goes through; the gray copy's, and the noise
// samples' (a mirrored GET sent to prod again, to learn which fields
// differ between two prod answers), are refused on the hop that would make
// them. The gray build has a bug: one order in four has a wrong total.
//
// It prints what was mirrored, compared and blocked, and the last
// difference as the edge's debug page shows it; it exits 1 if a write of
// a copy reached the ledger, or a user got an answer from the gray build.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/shadow"
)

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `Usage: shadow

Runs graylb's dark-launch demo and exits: an in-memory registry and real HTTP
servers on free loopback ports (edge -> orders, prod and gray -> ledger), every
prod GET to orders mirrored to its gray build, compared and never returned, the
writes the copies would make refused. Exit status 1 if a copy's write reached
the ledger. It needs nothing but Go and takes no flags; make demo-shadow runs it.
`)
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err := run(os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "shadow:", err)
		os.Exit(1)
	}
}

// users is how many orders the client reads.
const users = 20

// rules is the rules document every service reads (one in Nacos, in a
// real estate): every prod GET mirrored.
const rules = `{"shadowPercent": 100}`

// outcomes counts the shadow events one LoadBalancer tells, by outcome.
type outcomes struct {
	mu     sync.Mutex
	counts map[shadow.Outcome]int
	by     map[string]int  // the differing copies by what differed
	noise  map[string]bool // the paths learned as noise
	done   chan struct{}   // a copy's outcome was told (same, differs, failed, dropped)
}

func newOutcomes() *outcomes {
	return &outcomes{counts: map[shadow.Outcome]int{}, by: map[string]int{}, noise: map[string]bool{}, done: make(chan struct{}, 4*users)}
}

func (o *outcomes) observe(e shadow.Event) {
	o.mu.Lock()
	o.counts[e.Outcome]++
	for by, differs := range map[string]bool{"status": e.Status, "latency": e.Latency, "body": e.Body} {
		if differs {
			o.by[by]++
		}
	}
	if e.Outcome == shadow.Noise {
		for _, p := range e.Paths {
			o.noise[p] = true
		}
	}
	o.mu.Unlock()
	switch e.Outcome {
	case shadow.Same, shadow.Differs, shadow.Failed, shadow.Dropped:
		select {
		case o.done <- struct{}{}:
		default:
		}
	}
}

func (o *outcomes) get(k shadow.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[k]
}

// ledger counts the POSTs it receives, and those a copy sent (marked).
type ledger struct {
	posts, marked atomic.Int64
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		l.posts.Add(1)
		if r.Header.Get(adapter.ShadowKey) != "" {
			l.marked.Add(1)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// order is an answer of orders: the order, with a request id and a time
// stamp that differ on every answer (noise the mirror learns).
type order struct {
	ID        int     `json:"id"`
	Items     []item  `json:"items"`
	Total     float64 `json:"total"`
	RequestID string  `json:"requestId"`
	ServedAt  string  `json:"servedAt"`
}

type item struct {
	SKU   string  `json:"sku"`
	Price float64 `json:"price"`
}

// orders is a build of the orders service: it reads an order, and writes a
// view of it to the ledger. A copy's write is refused: the build carries
// on without it, as a read should (it counts the refusals).
type orders struct {
	gray    bool // the gray build: its totals are wrong for one order in four
	client  *http.Client
	served  atomic.Int64
	refused atomic.Int64
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/orders/"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	n := o.served.Add(1)
	post, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://ledger/views", strings.NewReader(fmt.Sprintf(`{"order":%d}`, id)))
	resp, err := o.client.Do(post)
	switch {
	case errors.Is(err, shadow.ErrWrite):
		o.refused.Add(1) // a copy: the view is not written, the read goes on
	case err != nil:
		http.Error(w, "ledger: "+err.Error(), http.StatusBadGateway)
		return
	default:
		resp.Body.Close()
	}
	a := order{ID: id, RequestID: fmt.Sprintf("%x-%d", time.Now().UnixNano(), n), ServedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	for i := range 3 {
		a.Items = append(a.Items, item{SKU: fmt.Sprintf("sku-%d-%d", id, i), Price: float64(10*id + i)})
		a.Total += float64(10*id + i)
	}
	if o.gray && id%4 == 0 {
		a.Total += 1 // the gray build's bug
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a)
}

// service is one process of the demo: its LoadBalancer (over the shared
// registry, the rules every service reads), what it tells of shadow
// traffic, and its HTTP server.
type service struct {
	lb     *graylb.LoadBalancer
	seen   *outcomes
	client *http.Client
	srv    *http.Server
	addr   string
}

func newService(reg *graylb.Registry) (*service, error) {
	r, err := graylb.ParseRules([]byte(rules))
	if err != nil {
		return nil, err
	}
	s := &service{seen: newOutcomes()}
	if s.lb, err = graylb.New(reg, graylb.WithRules(r), shadow.WithObserver(s.seen.observe)); err != nil {
		return nil, err
	}
	s.client = &http.Client{Transport: httpctx.NewTransport(s.lb), Timeout: 5 * time.Second}
	return s, nil
}

// serve serves h behind graylb's middleware (it admits the routing keys and
// the shadow mark) on a free loopback port, and registers it as an
// instance of name when name is not empty.
func (s *service) serve(reg *graylb.Registry, name string, gray bool, h http.Handler) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.srv = &http.Server{Handler: httpctx.Middleware(s.lb)(h), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(lis)
	s.addr = lis.Addr().String()
	if name == "" {
		return nil
	}
	var md map[string]string
	if gray {
		md = map[string]string{"gray": "true"}
	}
	return reg.Register(graylb.NewInstance(name, "127.0.0.1", lis.Addr().(*net.TCPAddr).Port, md))
}

func (s *service) close() {
	if s.srv != nil {
		s.srv.Close()
	}
	s.lb.Close()
}

// run runs the demo, printing to out; an error when a copy's write got
// through or a user got the gray build's answer. ordersClient, when not
// nil, is the client orders writes to the ledger with (the test's: one
// that ignores graylb), instead of graylb's Transport.
func run(out io.Writer, ordersClient func(ledgerAddr string) *http.Client) error {
	reg := graylb.NewRegistry()
	var all []*service
	defer func() {
		for _, s := range all {
			s.close()
		}
	}()
	start := func(name string, gray bool, h func(*service) http.Handler) (*service, error) {
		s, err := newService(reg)
		if err != nil {
			return nil, err
		}
		all = append(all, s)
		return s, s.serve(reg, name, gray, h(s))
	}
	led := &ledger{}
	ledgerProc, err := start("ledger", false, func(*service) http.Handler { return led })
	if err != nil {
		return err
	}
	builds := map[bool]*orders{}
	procs := map[bool]*service{}
	for _, gray := range []bool{false, true} {
		s, err := start("orders", gray, func(s *service) http.Handler {
			builds[gray] = &orders{gray: gray, client: s.client}
			if ordersClient != nil {
				builds[gray].client = ordersClient(ledgerProc.addr)
			}
			return builds[gray]
		})
		if err != nil {
			return err
		}
		procs[gray] = s
	}
	edge, err := start("", false, func(s *service) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/debug/graylb", debugpage.Handler(s.lb))
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://orders"+r.URL.Path, nil)
			resp, err := s.client.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
			io.Copy(w, resp.Body)
		})
		return mux
	})
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "graylb dark launch: client -> edge -> orders (1 prod, 1 gray build) -> POST ledger; rules %s\n\n", rules)
	wrong := 0 // users' answers that are not prod's (a wrong total)
	for id := 1; id <= users; id++ {
		resp, err := http.Get("http://" + edge.addr + "/orders/" + strconv.Itoa(id))
		if err != nil {
			return err
		}
		var o order
		err = json.NewDecoder(resp.Body).Decode(&o)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("order %d: %d, %v", id, resp.StatusCode, err)
		}
		if o.Total != float64(30*id+3) {
			wrong++
		}
	}
	// The copies end after their primaries: wait until each is told.
	for range users {
		select {
		case <-edge.seen.done:
		case <-time.After(10 * time.Second):
			return errors.New("the shadow copies' outcomes were not all told within 10 s")
		}
	}

	prodOrders, grayOrders := builds[false], builds[true]
	samples := prodOrders.served.Load() - users
	fmt.Fprintf(out, "users: %d orders read through the edge, every answer prod's (%d with a wrong total)\n", users, wrong)
	fmt.Fprintf(out, "mirrored: %d GETs copied to the gray build of orders; %d also sent to prod again (noise samples)\n",
		grayOrders.served.Load(), samples)
	edge.seen.mu.Lock()
	noise := make([]string, 0, len(edge.seen.noise))
	for p := range edge.seen.noise {
		noise = append(noise, p)
	}
	fmt.Fprintf(out, "compared: %d the same as prod's, %d differing (by body %d, status %d, latency %d), %d failed; learned as noise (they differ between two prod answers): %s\n",
		edge.seen.counts[shadow.Same], edge.seen.counts[shadow.Differs], edge.seen.by["body"], edge.seen.by["status"], edge.seen.by["latency"],
		edge.seen.counts[shadow.Failed], strings.Join(slices.Sorted(slices.Values(noise)), ", "))
	edge.seen.mu.Unlock()
	fmt.Fprintf(out, "blocked: %d writes of the copies refused (POST ledger/views: %d on the gray build, %d on prod for the noise samples), told to their LoadBalancers' observers as blocked-write: %d\n",
		grayOrders.refused.Load()+prodOrders.refused.Load(), grayOrders.refused.Load(), prodOrders.refused.Load(),
		procs[false].seen.get(shadow.BlockedWrite)+procs[true].seen.get(shadow.BlockedWrite))
	fmt.Fprintf(out, "ledger: %d POSTs received (%d users' reads), %d of them from a copy\n", led.posts.Load(), users, led.marked.Load())

	if err := printLastDiff(out, edge.addr); err != nil {
		return err
	}
	switch {
	case led.marked.Load() > 0 || led.posts.Load() != users:
		return fmt.Errorf("a copy's write got through: the ledger received %d POSTs for %d reads, %d marked", led.posts.Load(), users, led.marked.Load())
	case wrong > 0:
		return fmt.Errorf("%d users got the gray build's answer", wrong)
	case grayOrders.served.Load() == 0 || edge.seen.get(shadow.Differs) == 0:
		return errors.New("nothing was mirrored, or the gray build's bug went unseen")
	}
	fmt.Fprintln(out, "\nok: no write of a copy got through, no user saw the gray build")
	return nil
}

// printLastDiff prints the newest difference as the edge's debug page
// gives it (its JSON).
func printLastDiff(out io.Writer, edge string) error {
	resp, err := http.Get("http://" + edge + "/debug/graylb?format=json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var st debugpage.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return err
	}
	if len(st.Shadow.Diffs) == 0 {
		return errors.New("the debug page shows no difference")
	}
	d := st.Shadow.Diffs[0]
	fmt.Fprintf(out, "\nthe debug page's last difference (%d kept): %s %s, by body at %s\n  prod: %s  gray: %s",
		len(st.Shadow.Diffs), d.Service, d.Route, strings.Join(d.Paths, ", "), d.Primary.Body, d.Copy.Body)
	return nil
}
