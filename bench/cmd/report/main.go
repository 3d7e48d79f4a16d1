// Command report runs graylb and its peers side by side, in one process,
// at every size of bench.Sizes, and writes BENCHMARKS.md and a chart of
// ns/op against the number of instances. With -kafka it also measures a
// record produced and consumed through a Kafka broker with plain franz-go
// and with kafkagray (bench.KafkaBench); without it, the Kafka section of
// BENCHMARKS.md is kept as it was. -only-kafka rewrites that section alone,
// -only-learning the learning section (bench.Learning) alone, -only-versus
// the section of graylb against grpc-go's round_robin alone. -peer with
// -size measures one row and writes nothing (a row run again and again, to
// count crashes).
//
//	go run ./cmd/report -out .. -nacos 127.0.0.1:8848 -kafka 127.0.0.1:19092
//	go run ./cmd/report -out .. -only-kafka -kafka 127.0.0.1:19092   # the Kafka section alone
//	go run ./cmd/report -out .. -only-learning                       # the learning section alone
//	go run ./cmd/report -out .. -only-versus                         # graylb against grpc-go alone
//	go run ./cmd/report -nacos 127.0.0.1:8848 -peer 'graylb on nacos.Supplier' -size 10000
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/bench"
	"github.com/graylb/graylb/policy"
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
	kafkaAddr := flag.String("kafka", os.Getenv("GRAYLB_KAFKA_ADDR"), "Kafka brokers (host:port, comma-separated) for the Kafka section (empty: keep the section as it is)")
	kafkaRecords := flag.Int("kafka-records", 50000, "records per case and round in the Kafka section")
	kafkaBatch := flag.Int("kafka-batch", 10000, "records per case in each turn of a Kafka round (plain and kafkagray take turns)")
	kafkaRounds := flag.Int("kafka-rounds", 9, "rounds of the Kafka section (the median is kept)")
	onlyKafka := flag.Bool("only-kafka", false, "measure the Kafka section alone and rewrite only it in BENCHMARKS.md (needs -kafka)")
	learning := flag.Bool("learning", true, "measure the learning section (bench.Learning)")
	onlyLearning := flag.Bool("only-learning", false, "measure the learning section alone and rewrite only it in BENCHMARKS.md")
	onlyVersus := flag.Bool("only-versus", false, "measure graylb against grpc-go's round_robin alone and rewrite only that section of BENCHMARKS.md")
	onePeer := flag.String("peer", "", "measure only the row of this peer (its name as in BENCHMARKS.md) at -size, and write nothing")
	oneSize := flag.Int("size", 0, "the instance count of -peer's row")
	flag.Parse()
	fmt.Printf("CPU: %s, GOMAXPROCS %d\n", cpuModel(), runtime.GOMAXPROCS(0))
	if *onlyVersus {
		var vs []versusRow
		for _, n := range bench.Sizes {
			v, err := versus(n)
			if err != nil {
				fail(err)
			}
			vs = append(vs, v)
		}
		if err := writeVersusOnly(filepath.Join(*out, "BENCHMARKS.md"), vs); err != nil {
			fail(err)
		}
		fmt.Println("rewrote the grpc-go section of BENCHMARKS.md")
		return
	}
	if *onlyLearning {
		rs, err := measureLearning()
		if err != nil {
			fail(err)
		}
		if err := writeLearningOnly(filepath.Join(*out, "BENCHMARKS.md"), learningSection(rs)); err != nil {
			fail(err)
		}
		fmt.Println("rewrote the learning section of BENCHMARKS.md")
		return
	}
	if *onlyKafka {
		if *kafkaAddr == "" {
			fail(fmt.Errorf("-only-kafka needs -kafka"))
		}
		section, err := measureKafka(*kafkaAddr, *kafkaRecords, *kafkaBatch, *kafkaRounds)
		if err != nil {
			fail(fmt.Errorf("kafka: %w", err))
		}
		if err := writeKafkaOnly(filepath.Join(*out, "BENCHMARKS.md"), section); err != nil {
			fail(err)
		}
		fmt.Println("rewrote the Kafka section of BENCHMARKS.md")
		return
	}
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
	if *onePeer != "" {
		if err := measureOne(*onePeer, *oneSize, peers, *nacosAddr); err != nil {
			fail(err)
		}
		return
	}

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
	var learned string
	if *learning {
		rs, err := measureLearning()
		if err != nil {
			fail(err)
		}
		learned = learningSection(rs)
	}
	var kafka string
	if *kafkaAddr != "" {
		var err error
		if kafka, err = measureKafka(*kafkaAddr, *kafkaRecords, *kafkaBatch, *kafkaRounds); err != nil {
			fail(fmt.Errorf("kafka: %w", err))
		}
	}
	if err := writeMarkdown(filepath.Join(*out, "BENCHMARKS.md"), rows, vs, mem, learned, kafka, *benchtime, *nacosAddr != "", time.Since(start)); err != nil {
		fail(err)
	}
	if err := writeChart(filepath.Join(*out, "docs", "bench-pick.png"), rows); err != nil {
		fail(err)
	}
	fmt.Printf("wrote BENCHMARKS.md and docs/bench-pick.png in %v\n", time.Since(start).Round(time.Second))
}

// measureOne measures the row of the peer named name at n instances alone
// (a Nacos row needs nacosAddr) and prints it; it fails when the row
// failed or no peer has that name.
func measureOne(name string, n int, peers []bench.Peer, nacosAddr string) error {
	if n <= 0 {
		return fmt.Errorf("-peer needs -size")
	}
	list := bench.Instances(n)
	for _, p := range peers {
		if p.Name == name {
			if r := measure(p, n, list); r.err != "" {
				return fmt.Errorf("%s at %d: %s", name, n, r.err)
			}
			return nil
		}
	}
	if nacosAddr == "" {
		return fmt.Errorf("no peer %q (the Nacos rows need -nacos)", name)
	}
	dir, err := os.MkdirTemp("", "graylb-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f, err := bench.NewNacosFixture(nacosAddr, dir, list)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range []bench.Peer{bench.NacosSDK(f), bench.GraylbNacos(f)} {
		if p.Name == name {
			if r := measure(p, n, list); r.err != "" {
				return fmt.Errorf("%s at %d: %s", name, n, r.err)
			}
			return nil
		}
	}
	return fmt.Errorf("no peer %q", name)
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
	fmt.Printf("versus grpc-go round_robin n=%-6d Pick %.1f ns (%.2f) ServicePicker %.1f ns (%.2f) grpc-go %.1f ns (%s)\n", n, v.byName, v.ratio, v.service, v.ratioService, v.grpc, cpuModel())
	return v, nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
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
