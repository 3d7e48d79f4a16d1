package matrixtest

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
	graylbkratos "github.com/graylb/graylb/kratos"
	"github.com/zeromicro/go-zero/core/logx"
)

// rulesDoc is the rules document every LoadBalancer of the matrix runs: a
// 50 % canary, a gray user, and a match rule that gives requests with
// x-lane: feat-1 the lane feat-1 (they stay prod, and go to the prod
// instances of version feat-1).
const rulesDoc = `{
	"canaryPercent": 50,
	"grayUsers": ["u-gray"],
	"matches": [{"key": "x-lane", "exact": "feat-1", "version": "feat-1"}]
}`

const (
	laneHeader  = "x-lane"
	laneVersion = "feat-1"
)

var (
	rules graylb.Rules
	// reg is the one registry every service of every cell registers in
	// (each cell under names of its own).
	reg = graylb.NewRegistry()
	// discovery is the Kratos clients' view of reg.
	discovery = graylbkratos.NewDiscovery(reg)
)

// TestMain sets Kratos' global selector once for the test binary: Kratos
// v2's clients take their selector from the global one only, so in a
// process every Kratos client picks with one LoadBalancer (here one over
// reg under the same rules, standing for the process's), while each
// service's graylbkratos.Client and Server use the service's own.
func TestMain(m *testing.M) {
	klog.SetLogger(klog.NewStdLogger(io.Discard)) // Kratos logs every start and stop
	logx.Disable()                                // go-zero logs to stdout
	logx.DisableStat()
	var err error
	if rules, err = graylb.ParseRules([]byte(rulesDoc)); err != nil {
		fmt.Fprintln(os.Stderr, "matrixtest: the rules document:", err)
		os.Exit(2)
	}
	lb, err := graylb.New(reg, lbOptions()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrixtest:", err)
		os.Exit(2)
	}
	b := graylbkratos.NewBuilder(lb)
	selector.SetGlobalSelector(b)
	code := m.Run()
	b.Close()
	lb.Close()
	os.Exit(code)
}

// lbOptions are every LoadBalancer's options: the rules and version
// routing (for the lane). No ContextHandler (the adapters read their own
// transport's keys) and no WithSelfGray: a service's prod and gray
// instances share its LoadBalancer, so the kind a hop picks comes from
// the request alone, never from the calling instance's own flag.
func lbOptions() []graylb.Option {
	return []graylb.Option{graylb.WithRules(rules), graylb.WithFilters(filter.Version())}
}

func newLB(t *testing.T) *graylb.LoadBalancer {
	t.Helper()
	lb, err := graylb.New(reg, lbOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	return lb
}

// A cell is a chain edge → A → B → C: the server adapter of each service
// and the client adapter A calls B with and B calls C with. The edge calls
// A through graylb (httpctx's Transport or grpcctx, by A's protocol), as
// a trusted internal caller; the untrusted caller calls A's instances
// directly.
type cell struct {
	a, b, c serverKind
	ab, bc  clientKind
	// family: the chain stays within one adapter family (one context slot
	// for the incoming keys today), a control that passes on today's code.
	family bool
}

func (c cell) name() string { return c.a.String() + ">" + c.b.String() + ">" + c.c.String() }

func (c cell) path() string {
	return fmt.Sprintf("edge -[%v]-> A %v -[%v]-> B %v -[%v]-> C %v", edgeClient(c.a), c.a, c.ab, c.b, c.bc, c.c)
}

func edgeClient(a serverKind) clientKind {
	if a.overHTTP() {
		return cliHTTPCtx
	}
	return cliGRPCCtx
}

var cells = []cell{
	// A service that receives over one adapter and calls over another.
	{a: srvHTTPCtx, ab: cliGRPCCtx, b: srvGRPCCtx, bc: cliHTTPCtx, c: srvHTTPCtx},
	{a: srvGRPCCtx, ab: cliHTTPCtx, b: srvHTTPCtx, bc: cliGRPCCtx, c: srvGRPCCtx},
	{a: srvKratosHTTP, ab: cliHTTPCtx, b: srvHTTPCtx, bc: cliZrpc, c: srvZrpc},
	{a: srvRest, ab: cliGRPCCtx, b: srvGRPCCtx, bc: cliKratosGRPC, c: srvKratosGRPC},
	{a: srvKratosGRPC, ab: cliKratosHTTP, b: srvKratosHTTP, bc: cliGRPCCtx, c: srvGRPCCtx},
	{a: srvZrpc, ab: cliKratosGRPC, b: srvKratosGRPC, bc: cliHTTPCtx, c: srvRest},
	{a: srvHTTPCtx, ab: cliKratosHTTP, b: srvKratosHTTP, bc: cliZrpc, c: srvZrpc},
	{a: srvGRPCCtx, ab: cliHTTPCtx, b: srvRest, bc: cliKratosHTTP, c: srvKratosHTTP},
	// A record hop: a service that receives HTTP produces a record, its
	// consumer calls gRPC; a Kratos gRPC service produces the last hop's.
	{a: srvHTTPCtx, ab: cliKafka, b: srvKafka, bc: cliGRPCCtx, c: srvGRPCCtx},
	{a: srvKratosHTTP, ab: cliKratosGRPC, b: srvKratosGRPC, bc: cliKafka, c: srvKafka},
	// Controls: one adapter family end to end.
	{a: srvHTTPCtx, ab: cliHTTPCtx, b: srvHTTPCtx, bc: cliHTTPCtx, c: srvHTTPCtx, family: true},
	{a: srvGRPCCtx, ab: cliGRPCCtx, b: srvGRPCCtx, bc: cliGRPCCtx, c: srvGRPCCtx, family: true},
	{a: srvKratosHTTP, ab: cliKratosGRPC, b: srvKratosGRPC, bc: cliKratosHTTP, c: srvKratosHTTP, family: true},
	{a: srvRest, ab: cliZrpc, b: srvZrpc, bc: cliZrpc, c: srvZrpc, family: true},
}

// The instances of every service: a prod, a gray and a lane one (prod, of
// version feat-1). Each answers "<service>:<kind>".
var instances = []struct {
	kind string
	md   map[string]string
}{
	{"prod", map[string]string{"gray": "false"}},
	{"gray", map[string]string{"gray": "true"}},
	{"lane", map[string]string{"gray": "false", "version": laneVersion}},
}

// A request sort: what the caller sends and what each hop must be.
type requestSort struct {
	name      string
	hdr       map[string]string
	untrusted bool   // sent straight to A's prod and gray instances, without the internal token
	want      string // gray, prod, lane, or one (every hop gray, or every hop prod)
}

var sorts = []requestSort{
	{name: "gray: true", hdr: map[string]string{"gray": "true"}, want: "gray"},
	{name: "gray: false", hdr: map[string]string{"gray": "false"}, want: "prod"},
	{name: "no header", want: "one"},
	{name: "gray user", hdr: map[string]string{"uid": "u-gray"}, want: "gray"},
	{name: "lane", hdr: map[string]string{laneHeader: laneVersion}, want: "lane"},
	// Every hop after the boundary (B, C) of one kind, decided at A by the
	// canary, not by the caller's gray: true.
	{name: "untrusted", hdr: map[string]string{"gray": "true"}, untrusted: true, want: "one"},
}

// perSort requests of each sort per cell: 6 sorts, 360 requests a cell.
const perSort = 60

// tally is what one sort of requests did in one cell.
type tally struct {
	wrong, total int
	gray         int // chains decided gray, for the sorts the canary decides
	examples     []string
}

// TestMatrix runs every cell: per request sort, every hop must be of the
// request's kind. On the code where each adapter keeps the incoming keys
// in a context slot of its own, every cell that crosses adapter families
// loses the request's kind at the crossing: the next hop decides again
// (the canary), and about half of its chains are wrong.
func TestMatrix(t *testing.T) {
	results := make([]map[string]*tally, len(cells))
	for i, c := range cells {
		t.Run(c.name(), func(t *testing.T) {
			results[i] = runCell(t, i, c)
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "wrong chains / requests, cell × request sort (* a control within one adapter family)\n%-34s", "cell")
	for _, s := range sorts {
		fmt.Fprintf(&b, " %11s", s.name)
	}
	b.WriteString("\n")
	for i, c := range cells {
		name := c.name()
		if c.family {
			name += " *"
		}
		fmt.Fprintf(&b, "%-34s", name)
		for _, s := range sorts {
			if tl := results[i][s.name]; tl != nil {
				fmt.Fprintf(&b, " %11s", fmt.Sprintf("%d/%d", tl.wrong, tl.total))
			} else {
				fmt.Fprintf(&b, " %11s", "-")
			}
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}

// runCell starts the cell's chain, sends every sort of request and checks
// every chain answered.
func runCell(t *testing.T, idx int, c cell) map[string]*tally {
	t.Logf("%s", c.path())
	names := [3]string{fmt.Sprintf("m%d-a", idx), fmt.Sprintf("m%d-b", idx), fmt.Sprintf("m%d-c", idx)}
	start := func(service string, k serverKind, lb *graylb.LoadBalancer, boundary bool, next caller) map[string]string {
		addrs := map[string]string{}
		for _, in := range instances {
			if k == srvKafka && in.kind == "lane" {
				continue // a group's consumers are of a kind, not of a version
			}
			me := service + ":" + in.kind
			addr := serve(t, k, lb, boundary, func(ctx context.Context) (string, error) {
				if next == nil {
					return me, nil
				}
				rest, err := next(ctx, nil) // the request's own context
				if err != nil {
					return "", fmt.Errorf("%s: %w", me, err)
				}
				return me + ">" + rest, nil
			})
			register(t, service, addr, in.md)
			addrs[in.kind] = addr
		}
		return addrs
	}
	lbC := newLB(t)
	start(names[2], c.c, lbC, false, nil)
	lbB := newLB(t)
	toC := dial(t, c.bc, lbB, names[2])
	start(names[1], c.b, lbB, false, toC)
	lbA := newLB(t)
	toB := dial(t, c.ab, lbA, names[1])
	addrsA := start(names[0], c.a, lbA, true, toB)
	toA := dial(t, edgeClient(c.a), newLB(t), names[0])
	// The untrusted caller reaches A's prod and gray instances in turn.
	untrusted := []struct {
		kind string
		call caller
	}{{"prod", direct(t, c.a.overHTTP(), addrsA["prod"])}, {"gray", direct(t, c.a.overHTTP(), addrsA["gray"])}}

	// Every client sees every instance before anything is counted (Kratos'
	// gRPC client hands its selector READY connections only). Each client
	// is called from the test with the kind on the context (graylb.WithValue):
	// that reaches the instance of the kind whatever the adapters do with
	// a request's incoming keys.
	warmUp(t, "edge → A", toA, names[0])
	if c.ab != cliKafka { // a record hop has no connection to wait for
		warmUp(t, "A → B", toB, names[1])
	}
	if c.bc != cliKafka {
		warmUp(t, "B → C", toC, names[2])
	}

	out := map[string]*tally{}
	for _, s := range sorts {
		tl := &tally{}
		out[s.name] = tl
		send(perSort, func(i int) {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			hdr := map[string]string{}
			for k, v := range s.hdr {
				hdr[k] = v
			}
			var (
				got   string
				err   error
				wantA string
			)
			if s.untrusted {
				u := untrusted[i%len(untrusted)]
				got, err = u.call(ctx, hdr)
				wantA = u.kind
			} else {
				hdr[internalHeader] = internalToken
				got, err = toA(ctx, hdr)
			}
			right, gray := judge(s, c, wantA, names, got)
			tl.add(got, err, right, gray)
		})
		if tl.wrong > 0 {
			t.Errorf("%s: %d wrong chains of %d; first: %s", s.name, tl.wrong, tl.total, strings.Join(tl.examples, "; "))
		}
		if tl.total != perSort {
			t.Errorf("%s: %d requests counted, want %d", s.name, tl.total, perSort)
		}
		if s.want == "one" && tl.wrong == 0 {
			// Decided by the 50 % canary: within 4.5 standard deviations
			// of half (a request that is gray whatever it sends, or prod,
			// passes no canary).
			half, dev := float64(tl.total)/2, 4.5*math.Sqrt(float64(tl.total))/2
			if g := float64(tl.gray); g < half-dev || g > half+dev {
				t.Errorf("%s: %d of %d chains gray; the 50 %% canary decides them: want %.0f-%.0f", s.name, tl.gray, tl.total, math.Ceil(half-dev), math.Floor(half+dev))
			}
		}
	}
	var row strings.Builder
	for _, s := range sorts {
		tl := out[s.name]
		fmt.Fprintf(&row, "  %s %d/%d", s.name, tl.wrong, tl.total)
	}
	t.Logf("wrong/total:%s", row.String())
	return out
}

func register(t *testing.T, service, addr string, md map[string]string) {
	t.Helper()
	host, port, err := splitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(graylb.NewInstance(service, host, port, md)); err != nil {
		t.Fatal(err)
	}
}

// judge says whether chain (each hop "<service>:<kind>") is right for the
// request sort s in cell c, and whether the kind decided for it is gray.
// wantA is the A instance the untrusted caller dialled. A lane request's
// record hop is prod: a record service has no lane consumer.
func judge(s requestSort, c cell, wantA string, names [3]string, chain string) (right, gray bool) {
	hops := strings.Split(chain, ">")
	if len(hops) != len(names) {
		return false, false
	}
	var kinds [3]string
	for i, h := range hops {
		service, kind, ok := strings.Cut(h, ":")
		if !ok || service != names[i] {
			return false, false
		}
		kinds[i] = kind
	}
	all := func(k string) bool { return kinds[0] == k && kinds[1] == k && kinds[2] == k }
	switch {
	case s.untrusted:
		// A is the instance dialled; B and C of the one kind decided at A.
		k := kinds[1]
		return kinds[0] == wantA && (k == "gray" || k == "prod") && kinds[2] == k, k == "gray"
	case s.want == "one":
		return all("gray") || all("prod"), all("gray")
	default:
		for i, k := range [3]serverKind{c.a, c.b, c.c} {
			want := s.want
			if want == "lane" && k == srvKafka {
				want = "prod"
			}
			if kinds[i] != want {
				return false, false
			}
		}
		return true, false
	}
}

func (tl *tally) add(chain string, err error, right, gray bool) {
	mu.Lock()
	defer mu.Unlock()
	tl.total++
	switch {
	case err != nil:
		tl.wrong++
		if len(tl.examples) < 3 {
			tl.examples = append(tl.examples, "error: "+err.Error())
		}
	case !right:
		tl.wrong++
		if len(tl.examples) < 3 {
			tl.examples = append(tl.examples, chain)
		}
	case gray:
		tl.gray++
	}
}

var mu sync.Mutex // the tallies

// send runs do(0) … do(n-1) from 4 callers at once.
func send(n int, do func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				do(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// warmUp calls through call until each kind of service's instances
// answered three times in a row, the kind set on the context.
func warmUp(t *testing.T, hop string, call caller, service string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, in := range instances {
		ctx := graylb.WithValue(context.Background(), "gray", in.md["gray"])
		if v := in.md["version"]; v != "" {
			ctx = graylb.WithValue(ctx, "version", v)
		}
		want := service + ":" + in.kind
		tick := time.NewTicker(20 * time.Millisecond)
		for ok := 0; ok < 3; {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			got, err := call(cctx, nil)
			cancel()
			if first, _, _ := strings.Cut(got, ">"); err == nil && first == want {
				ok++
				continue
			}
			ok = 0
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s not reached within 20s: answered %q, %v", hop, want, got, err)
			}
			<-tick.C // polled every 20 ms
		}
		tick.Stop()
	}
}
