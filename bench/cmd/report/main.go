// Command report runs graylb and its peers side by side, in one process,
// at every size of bench.Sizes, and writes BENCHMARKS.md and a chart of
// ns/op against the number of instances.
//
//	go run ./cmd/report -out .. -nacos 127.0.0.1:8848
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/bench"
	"github.com/graylb/graylb/policy"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

type row struct {
	peer, note string
	n          int
	ns, bytes  float64
	allocs     float64
	updateNs   float64 // 0: not applicable
	err        string
}

func main() {
	out := flag.String("out", "..", "folder for BENCHMARKS.md and docs/")
	nacosAddr := flag.String("nacos", os.Getenv("GRAYLB_NACOS_ADDR"), "Nacos server for the Nacos rows (empty: skip them)")
	benchtime := flag.String("benchtime", "300ms", "time per measurement")
	memory := flag.Bool("memory", true, "measure the memory table (heap per service)")
	flag.Parse()
	testing.Init()
	if err := flag.Set("test.benchtime", *benchtime); err != nil {
		fail(err)
	}
	start := time.Now()
	peers := append([]bench.Peer{
		bench.Graylb("round robin", policy.RoundRobin()),
		bench.GraylbService("round robin", policy.RoundRobin()),
		bench.Graylb("random", policy.Random()),
		bench.Graylb("weighted round robin", policy.WeightedRoundRobin()),
	}, bench.KratosPeers()...)
	peers = append(peers, bench.SeedPort(), bench.GRPCRoundRobin())

	var rows []row
	var vs []versusRow
	for _, n := range bench.Sizes {
		v, err := versus(n)
		if err != nil {
			fail(err)
		}
		vs = append(vs, v)
		list := bench.Instances(n)
		for _, p := range peers {
			rows = append(rows, measure(p, n, list))
		}
		if *nacosAddr != "" {
			dir, _ := os.MkdirTemp("", "graylb-bench")
			f, err := bench.NewNacosFixture(*nacosAddr, dir, list)
			if err != nil {
				rows = append(rows, row{peer: "nacos rows", n: n, err: err.Error()})
			} else {
				for _, p := range []bench.Peer{bench.NacosSDK(f), bench.GraylbNacos(f)} {
					rows = append(rows, measure(p, n, list))
				}
				f.Close()
			}
			os.RemoveAll(dir)
		}
	}
	var mem []memoryRow
	if *memory {
		mem = measureMemory()
	}
	if err := writeMarkdown(filepath.Join(*out, "BENCHMARKS.md"), rows, vs, mem, *benchtime, *nacosAddr != "", time.Since(start)); err != nil {
		fail(err)
	}
	if err := writeChart(filepath.Join(*out, "docs", "bench-pick.png"), rows); err != nil {
		fail(err)
	}
	fmt.Printf("wrote BENCHMARKS.md and docs/bench-pick.png in %v\n", time.Since(start).Round(time.Second))
}

func measure(p bench.Peer, n int, list []graylb.Instance) row {
	r := row{peer: p.Name, note: p.Note, n: n}
	pk, err := p.Build(list)
	if err != nil {
		r.err = err.Error()
		fmt.Printf("%-40s n=%-6d error: %v\n", p.Name, n, err)
		return r
	}
	defer pk.Close()
	reqs := bench.Requests()
	for i := 0; i < 100; i++ { // warm up, and check the peer answers
		if _, err := pk.Pick(reqs[i&1]); err != nil {
			r.err = err.Error()
			return r
		}
	}
	var pickErr error
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := pk.Pick(reqs[i&1]); err != nil {
				pickErr = err
				b.FailNow()
			}
		}
	})
	if pickErr != nil {
		r.err = pickErr.Error()
		return r
	}
	r.ns = float64(res.T.Nanoseconds()) / float64(res.N)
	r.bytes, r.allocs = float64(res.AllocedBytesPerOp()), float64(res.AllocsPerOp())
	if pk.Update != nil {
		u := testing.Benchmark(func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				pk.Update(list)
			}
		})
		r.updateNs = float64(u.T.Nanoseconds()) / float64(u.N)
	}
	fmt.Printf("%-40s n=%-6d %12.0f ns/op %10.0f B/op %6.0f allocs/op update %12.0f ns\n", p.Name, n, r.ns, r.bytes, r.allocs, r.updateNs)
	return r
}

// versusRow is graylb's pick against grpc-go round_robin's at one size,
// measured in alternating batches (bench.Versus): the medians of
// versusRounds rounds.
type versusRow struct {
	n                     int
	byName, service, grpc float64 // ns per pick
	ratio, ratioService   float64 // graylb's time over grpc-go's
}

const (
	versusRounds = 5
	versusPicks  = 1_000_000 // per picker and round
)

func versus(n int) (versusRow, error) {
	var pickers []bench.Picker
	for _, p := range []bench.Peer{bench.Graylb("round robin", policy.RoundRobin()), bench.GraylbService("round robin", policy.RoundRobin()), bench.GRPCRoundRobin()} {
		pk, err := p.Build(bench.Instances(n))
		if err != nil {
			return versusRow{}, fmt.Errorf("%s: %w", p.Name, err)
		}
		defer pk.Close()
		pickers = append(pickers, pk)
	}
	var byName, service, grpc, ratio, ratioService []float64
	for i := 0; i < versusRounds; i++ {
		ns := bench.Versus(bench.Requests(), versusPicks, pickers...)
		byName, service, grpc = append(byName, ns[0]), append(service, ns[1]), append(grpc, ns[2])
		ratio, ratioService = append(ratio, ns[0]/ns[2]), append(ratioService, ns[1]/ns[2])
	}
	v := versusRow{n: n, byName: median(byName), service: median(service), grpc: median(grpc), ratio: median(ratio), ratioService: median(ratioService)}
	fmt.Printf("versus grpc-go round_robin n=%-6d Pick %.1f ns (%.2f) ServicePicker %.1f ns (%.2f) grpc-go %.1f ns\n", n, v.byName, v.ratio, v.service, v.ratioService, v.grpc)
	return v, nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func human(ns float64) string {
	switch {
	case ns == 0:
		return "n/a"
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}

func writeMarkdown(path string, rows []row, vs []versusRow, mem []memoryRow, benchtime string, withNacos bool, took time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Generated by `make bench` (bench/cmd/report): every peer measured in one process, one after\n")
	fmt.Fprintf(&b, "the other, at each size. Ratios are to **graylb round robin at the same size, measured in the\n")
	fmt.Fprintf(&b, "same run**; absolute times move with the machine (a shared, noisy one), ratios much less.\n\n")
	fmt.Fprintf(&b, "- Go %s, %s/%s, GOMAXPROCS %d, CPU: %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), cpuModel())
	fmt.Fprintf(&b, "- each cell: `testing.Benchmark` with -benchtime %s, count 1; requests alternate gray/prod, both asking for version v1\n", benchtime)
	fmt.Fprintf(&b, "- instances: half gray, half tagged version v1 (prod and gray alike); every filtering peer gives the same answers (bench/peers_test.go)\n")
	fmt.Fprintf(&b, "- whole run: %v\n\n", took.Round(time.Second))
	fmt.Fprintf(&b, "![ns/op against instances](docs/bench-pick.png)\n\n")
	fmt.Fprintf(&b, "## graylb against grpc-go round_robin, in alternating batches\n\n")
	fmt.Fprintf(&b, "graylb's gray+version pick (round robin) by the service's name (`LoadBalancer.Pick`) and through its\n")
	fmt.Fprintf(&b, "`ServicePicker`, and grpc-go's `round_robin` picker (no filtering), over the same list: batches of 1000\n")
	fmt.Fprintf(&b, "picks take turns (`bench.Versus`, %d picks each per round), so the machine's drift falls on all three alike;\n", versusPicks)
	fmt.Fprintf(&b, "each cell is the median of %d rounds, the ratios are graylb's time over grpc-go's. The grpc-go column\n", versusRounds)
	fmt.Fprintf(&b, "includes the harness's lookup of the picked connection's instance (a map by address), which\n")
	fmt.Fprintf(&b, "graylb's picks do not need.\n\n")
	fmt.Fprintf(&b, "| instances | graylb Pick ns | × grpc-go | graylb ServicePicker ns | × grpc-go | grpc-go round_robin ns |\n|---:|---:|---:|---:|---:|---:|\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "| %d | %.1f | %.2f | %.1f | %.2f | %.1f |\n", v.n, v.byName, v.ratio, v.service, v.ratioService, v.grpc)
	}
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Peers: graylb's pick (GrayFilter + VersionFilter over a precomputed tree) with each policy; Kratos v2.8.3's\n")
	fmt.Fprintf(&b, "selector with its wrr, p2c and random balancers, a gray `NodeFilter` equivalent to the gray rule and `filter.Version`;\n")
	fmt.Fprintf(&b, "a faithful port of seed 000's per-request gray filter followed by seed 004's version preference; grpc-go's\n")
	fmt.Fprintf(&b, "`round_robin` picker (no filtering: the floor)")
	if withNacos {
		fmt.Fprintf(&b, "; nacos-sdk-go's `SelectOneHealthyInstance` (no gray filter) and graylb on its\nNacos supplier, both over the same service registered with N instances in a real Nacos server (r-nacos)")
	}
	fmt.Fprintf(&b, ".\n\n")

	bySize := map[int][]row{}
	for _, r := range rows {
		bySize[r.n] = append(bySize[r.n], r)
	}
	sizes := make([]int, 0, len(bySize))
	for n := range bySize {
		sizes = append(sizes, n)
	}
	sort.Ints(sizes)
	for _, n := range sizes {
		var base float64
		for _, r := range bySize[n] {
			if r.peer == "graylb round robin" {
				base = r.ns
			}
		}
		fmt.Fprintf(&b, "## %d instances\n\n| peer | ns/op | B/op | allocs/op | × graylb RR | one list update |\n|---|---:|---:|---:|---:|---:|\n", n)
		for _, r := range bySize[n] {
			if r.err != "" {
				fmt.Fprintf(&b, "| %s | error: %s | | | | |\n", r.peer, strings.ReplaceAll(r.err, "\n", " "))
				continue
			}
			ratio := "n/a"
			if base > 0 {
				ratio = fmt.Sprintf("%.2f", r.ns/base)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %s | %s |\n", r.peer, r.ns, r.bytes, r.allocs, ratio, human(r.updateNs))
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "\"One list update\" is what a registry push costs the peer: graylb rebuilds its routing tree, Kratos\n")
	fmt.Fprintf(&b, "re-applies its nodes, the seed port swaps its list (its filtering happens per request instead),\n")
	fmt.Fprintf(&b, "grpc-go's round_robin receives new endpoints and builds a new picker (the harness waits until the picker\n")
	fmt.Fprintf(&b, "covers every connection, which adds 2n picks). The nacos-sdk-go rows have none:\n")
	fmt.Fprintf(&b, "the SDK rebuilds its candidate list on every call.\n")
	writeMemory(&b, mem)
	// Sections measured by tests of their own (bench/latency_test.go)
	// follow the report; keep them.
	if old, err := os.ReadFile(path); err == nil {
		if i := strings.Index(string(old), "\n## Latency-aware balancing"); i >= 0 {
			b.WriteString(string(old[i:]))
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func writeChart(path string, rows []row) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Cost of one pick (gray + version), log-log"
	p.X.Label.Text = "instances"
	p.Y.Label.Text = "ns/op"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	byPeer := map[string]plotter.XYs{}
	var order []string
	for _, r := range rows {
		if r.err != "" || r.ns <= 0 {
			continue
		}
		if _, ok := byPeer[r.peer]; !ok {
			order = append(order, r.peer)
		}
		byPeer[r.peer] = append(byPeer[r.peer], plotter.XY{X: float64(r.n), Y: r.ns})
	}
	for i, name := range order {
		l, pts, err := plotter.NewLinePoints(byPeer[name])
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		if strings.HasPrefix(name, "graylb") {
			l.Width = vg.Points(2.5)
		}
		l.Color, pts.Color = c, c
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
	}
	p.Add(plotter.NewGrid())
	_ = color.Black
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}

// memoryRow is one memory peer at every size of bench.MemorySizes.
type memoryRow struct {
	peer    string
	results []bench.MemoryResult
	errs    []string
}

// memoryRuns is how many times each memory cell is measured (the least
// is kept).
const memoryRuns = 3

func measureMemory() []memoryRow {
	var out []memoryRow
	for _, p := range bench.MemoryPeers() {
		r := memoryRow{peer: p.Name}
		for _, size := range bench.MemorySizes {
			m, err := bench.MeasureMemory(p, size, memoryRuns)
			e := ""
			if err != nil {
				e = err.Error()
			}
			r.results = append(r.results, m)
			r.errs = append(r.errs, e)
		}
		out = append(out, r)
	}
	return out
}

func writeMemory(b *strings.Builder, mem []memoryRow) {
	if len(mem) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Memory: what each peer holds per service\n\n")
	fmt.Fprintf(b, "Heap after GC (the least of %d runs) of each peer holding the routing of every service, each service\n", memoryRuns)
	fmt.Fprintf(b, "picked once gray and once prod (version v1); half the instances gray, and with versions each tagged one\n")
	fmt.Fprintf(b, "of three. What the registry hands over is built first and not counted: graylb's instance lists (its\n")
	fmt.Fprintf(b, "Cache keeps a list it takes whole without a copy), Kratos' `registry.ServiceInstance`s. Counted: graylb's\n")
	fmt.Fprintf(b, "LoadBalancer with its Cache and routing trees (`bench.GraylbMemory`); Kratos' selector per service, its\n")
	fmt.Fprintf(b, "nodes from `Apply` and its balancer's state (filters run per request and hold nothing); grpc-go's\n")
	fmt.Fprintf(b, "`round_robin` balancer and picker per service, as a ClientConn per target holds them, built through the\n")
	fmt.Fprintf(b, "balancer API with fake SubConns that turn READY at once: no ClientConn, resolver or transports, so a floor\n")
	fmt.Fprintf(b, "for grpc-go (measured over a tenth of the services; per service it is the same). grpc-go routes by\n")
	fmt.Fprintf(b, "neither kind nor version, so its state is the same with versions. Each cell: bytes per service / per instance.\n\n")
	fmt.Fprintf(b, "| peer |")
	for _, s := range bench.MemorySizes {
		v := ""
		if s.Versions {
			v = ", versions"
		}
		fmt.Fprintf(b, " %d × %d%s |", s.Services, s.Instances, v)
	}
	fmt.Fprintf(b, " whole at %d × %d, versions |\n|---|", bench.MemorySizes[len(bench.MemorySizes)-1].Services, bench.MemorySizes[len(bench.MemorySizes)-1].Instances)
	for range bench.MemorySizes {
		fmt.Fprintf(b, "---:|")
	}
	fmt.Fprintf(b, "---:|\n")
	for _, r := range mem {
		fmt.Fprintf(b, "| %s |", r.peer)
		for i, m := range r.results {
			if r.errs[i] != "" {
				fmt.Fprintf(b, " error: %s |", strings.ReplaceAll(r.errs[i], "\n", " "))
				continue
			}
			fmt.Fprintf(b, " %s / %.0f B |", kb(m.PerService), m.PerInstance)
		}
		last := r.results[len(r.results)-1]
		fmt.Fprintf(b, " %.1f MB |\n", last.Whole/1e6)
	}
	fmt.Fprintln(b)
}

// kb formats bytes as B under 10 000, else KB (1 000 bytes).
func kb(n float64) string {
	if n < 10000 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f KB", n/1000)
}
