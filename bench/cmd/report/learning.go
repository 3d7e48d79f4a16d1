package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/graylb/graylb/bench"
)

// learningHeading opens BENCHMARKS.md's learning section; the section runs
// to the next heading of its level.
const learningHeading = "\n## Learning services: the first picks of many services"

// learningRuns is how many times each learning row is measured (the least
// is kept).
const learningRuns = 3

func measureLearning() ([]bench.LearningResult, error) {
	var out []bench.LearningResult
	for _, n := range bench.LearningSizes {
		r, err := bench.Learning(n, learningRuns)
		if err != nil {
			return nil, fmt.Errorf("learning %d services: %w", n, err)
		}
		fmt.Printf("learning %-7d services %10v  %8v a service  (%s)\n", n, r.Took.Round(time.Millisecond), r.PerService().Round(10*time.Nanosecond), cpuModel())
		out = append(out, r)
	}
	return out, nil
}

// learningSection is the learning section of BENCHMARKS.md, from its
// heading.
func learningSection(rs []bench.LearningResult) string {
	var b strings.Builder
	b.WriteString(learningHeading[1:] + "\n\n")
	fmt.Fprintf(&b, "A LoadBalancer learns a service at its first pick: it asks its Supplier for the list, watches it,\n")
	fmt.Fprintf(&b, "builds the service's routing and adds it to its table of services. `bench.Learning`: N services of 4\n")
	fmt.Fprintf(&b, "instances each (one gray) in a Registry, one LoadBalancer picking each service once gray and once prod;\n")
	fmt.Fprintf(&b, "the least of %d runs. Target: 100 000 services in at most %v, and the time per service flat.\n\n", learningRuns, bench.LearningTarget)
	fmt.Fprintf(&b, "| services | all first picks | per service | × per service at %d | CPU |\n|---:|---:|---:|---:|---|\n", rs[0].Services)
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %s | %s | %.2f | %s |\n", r.Services, human(float64(r.Took)), human(float64(r.PerService())),
			float64(r.PerService())/float64(rs[0].PerService()), cpuModel())
	}
	fmt.Fprintf(&b, "\nHow it stays linear and lock-free for readers: the table of services is a hash table whose buckets\n")
	fmt.Fprintf(&b, "are immutable slices, each behind an atomic pointer. Adding a service copies its bucket (a few\n")
	fmt.Fprintf(&b, "entries) with the new entry and swaps that one pointer; when the table holds as many services as it\n")
	fmt.Fprintf(&b, "has buckets, a table of twice as many is built (every entry copied once) and swapped in whole: O(1)\n")
	fmt.Fprintf(&b, "amortised per service, where copying a map of every service per new one made learning N services\n")
	fmt.Fprintf(&b, "O(N²). A pick loads the table and one bucket, without a lock. A reader holding a table from before a\n")
	fmt.Fprintf(&b, "doubling may miss a service added since: it finds none and takes the slow path (addService), which\n")
	fmt.Fprintf(&b, "looks again under the LoadBalancer's lock and finds it in the current table.\n")
	return b.String()
}

// keptSection returns old's section opened by heading (a "\n## " line),
// up to the next heading of its level, or "" when old has none.
func keptSection(old, heading string) string {
	i := strings.Index(old, heading)
	if i < 0 {
		return ""
	}
	rest := old[i+1:]
	if j := strings.Index(rest[1:], "\n## "); j >= 0 {
		return rest[:j+2]
	}
	return rest
}

// writeLearningOnly rewrites the learning section of the file at path,
// inserted before the Kafka section (else the latency section, else at the
// end) when the file has none.
func writeLearningOnly(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	if k := keptSection(s, learningHeading); k != "" {
		s = strings.Replace(s, k, section+"\n", 1)
	} else if i := strings.Index(s, kafkaHeading); i >= 0 {
		s = s[:i+1] + section + "\n" + s[i+1:]
	} else if i := strings.Index(s, latencyHeading); i >= 0 {
		s = s[:i+1] + section + "\n" + s[i+1:]
	} else {
		s += "\n" + section
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
