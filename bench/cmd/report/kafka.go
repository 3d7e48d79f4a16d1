package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/graylb/graylb/bench"
)

// kafkaHeading opens BENCHMARKS.md's Kafka section; the section runs to
// the next heading of its level or the end.
const kafkaHeading = "\n## Kafka: records produced and consumed through a broker"

// measureKafka runs the Kafka comparison (bench.KafkaBench) against
// brokers: rounds rounds of records records per case, and returns the
// section for BENCHMARKS.md.
func measureKafka(brokers string, records, batch, rounds int) (string, error) {
	if rounds < 1 {
		return "", fmt.Errorf("-kafka-rounds %d: want at least 1", rounds)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k, err := bench.NewKafkaBench(ctx, strings.Split(brokers, ","), records, batch)
	if err != nil {
		return "", err
	}
	defer k.Close()
	var all [][]bench.KafkaRound
	for i := 0; i < rounds; i++ {
		r, err := k.Round(ctx)
		if err != nil {
			return "", fmt.Errorf("round %d: %w", i+1, err)
		}
		all = append(all, r)
		fmt.Printf("kafka round %d (ns/record, produce+consume wall, CPU):\n", i+1)
		for j, c := range r {
			fmt.Printf("   %-48s %6.0f+%-6.0f %6.0f+%-6.0f\n", bench.KafkaCases[j].Name, c.ProduceNs, c.ConsumeNs, c.ProduceCPUNs, c.ConsumeCPUNs)
		}
	}
	s := bench.SummarizeKafka(all)
	fmt.Printf("kafka: kafkagray / plain franz-go: prod records %.3f (CPU %.3f), gray records %.3f (CPU %.3f), gray against one partition %.3f (CPU %.3f)\n",
		s.Ratio[1], s.CPURatio[1], s.Ratio[3], s.CPURatio[3], s.GrayLayout, s.GrayLayoutCPU)
	return kafkaSection(s, records, batch), nil
}

// kafkaSection is the Kafka section of BENCHMARKS.md, from its heading.
func kafkaSection(s bench.KafkaSummary, records, batch int) string {
	var b strings.Builder
	b.WriteString(kafkaHeading[1:] + "\n\n")
	fmt.Fprintf(&b, "What kafkagray costs a record from its producer to its consumer's handler, against plain franz-go\n")
	fmt.Fprintf(&b, "v1.5.0 in the same process and run (`bench.KafkaBench`, `-kafka`), through a real Apache Kafka broker\n")
	fmt.Fprintf(&b, "on loopback (`scripts/kafka.sh`, one broker): per case a topic of %d partitions and one consumer of\n", bench.KafkaPartitions)
	fmt.Fprintf(&b, "a group that stays joined. A turn produces %d records (keyed, 1000 distinct keys, 100-byte values;\n", batch)
	fmt.Fprintf(&b, "asynchronous `Produce`, then `Flush`) and consumes them back (`PollRecords`, the handler, then\n")
	fmt.Fprintf(&b, "`CommitUncommittedOffsets`, until the last is handled). Plain: franz-go's default partitioner and\n")
	fmt.Fprintf(&b, "group balancer, the handler gets the record; a plain gray record carries a `gray: true` header its\n")
	fmt.Fprintf(&b, "producer wrote by hand (the same bytes on the wire). kafkagray: its partitioner and group balancer,\n")
	fmt.Fprintf(&b, "`Link.Produce` (Stamp) with the context of the request (none for prod records, a gray request's\n")
	fmt.Fprintf(&b, "for gray ones), `Link.Handle` on consume (the handler gets the record's context); gray records go\n")
	fmt.Fprintf(&b, "to the topic's gray partition (the last), consumed by a gray member; the last row is plain franz-go\n")
	fmt.Fprintf(&b, "putting its gray records on that one partition too (`kgo.ManualPartitioner`), to tell what the layout\n")
	fmt.Fprintf(&b, "costs from what the module's code does. The cases take turns (plain and kafkagray of a kind in\n")
	fmt.Fprintf(&b, "alternating order), %d records per case and round, %d rounds; each cell is the median over rounds,\n", records, s.Rounds)
	fmt.Fprintf(&b, "a total the sum of the produce and consume medians, a ratio the median of each round's ratio to the\n")
	fmt.Fprintf(&b, "plain row of its kind. Wall time includes the broker's\n")
	fmt.Fprintf(&b, "work (the broker shares the machine's cores); CPU time is this process's alone (user and system:\n")
	fmt.Fprintf(&b, "franz-go, the module and the harness). Allocations are the whole process's per record: the\n")
	fmt.Fprintf(&b, "difference between two rows of a kind is what kafkagray adds.\n\n")
	fmt.Fprintf(&b, "| case | produce ns/record | consume ns/record | total | × plain | CPU ns/record | × plain | allocs/record produced | allocs/record consumed |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, c := range s.Cases {
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.2f | %.2f | %.2f |\n",
			bench.KafkaCases[i].Name, c.ProduceNs, c.ConsumeNs, c.TotalNs(), s.Ratio[i], c.TotalCPUNs(), s.CPURatio[i], c.ProduceAllocs, c.ConsumeAllocs)
	}
	fmt.Fprintf(&b, "\nkafkagray's gray records against plain franz-go's on one partition: %.2f × the wall time, %.2f × the CPU time.\n",
		s.GrayLayout, s.GrayLayoutCPU)
	b.WriteString("\n")
	return b.String()
}

// keptKafka returns the Kafka section of old (BENCHMARKS.md as it was),
// from its heading, or "".
func keptKafka(old string) string {
	i := strings.Index(old, kafkaHeading)
	if i < 0 {
		return ""
	}
	rest := old[i+1:]
	if j := strings.Index(rest[1:], "\n## "); j >= 0 {
		return rest[:j+2]
	}
	return rest
}

// spliceKafka returns old with its Kafka section replaced by section, or
// with section inserted before the latency section (at the end without
// one).
func spliceKafka(old, section string) string {
	if k := keptKafka(old); k != "" {
		return strings.Replace(old, k, section, 1)
	}
	if i := strings.Index(old, latencyHeading); i >= 0 {
		return old[:i+1] + section + old[i+1:]
	}
	if old != "" && !strings.HasSuffix(old, "\n") {
		old += "\n"
	}
	return old + "\n" + section
}

// writeKafkaOnly rewrites path's Kafka section alone.
func writeKafkaOnly(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(spliceKafka(string(old), section)), 0o644)
}
