package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/graylb/graylb"
)

// The registration metadata a Kafka consumer instance carries (kafkagray's
// Link.Metadata). The command reads only these: it does not depend on
// Kafka.
const (
	metaKafkaGroup          = "kafka.group"
	metaKafkaTopics         = "kafka.topics"
	metaKafkaKind           = "kafka.kind"
	metaKafkaGrayPartitions = "kafka.grayPartitions"
)

// consumerGroupStatus is one consumer group of a service's instances.
type consumerGroupStatus struct {
	Group  string   `json:"group"`
	Topics []string `json:"topics"` // every topic a consumer of the group names, sorted
	Prod   int      `json:"prod"`   // registered prod consumer instances
	Gray   int      `json:"gray"`   // registered gray consumer instances
	// Down are those of Prod and Gray that are unhealthy or disabled in
	// the registry: likely not consuming.
	Down int `json:"down"`
	// GrayPartitions are the gray partition counts the consumers announce
	// (each must be the same), sorted; consumers that announce none are
	// left out.
	GrayPartitions []string `json:"grayPartitions"`
}

// consumerKind is an instance's consumer kind: its kafka.kind, else its
// gray metadata (a consumer's kind is its own flag: gray addresses in the
// rules do not change it).
func consumerKind(md map[string]string, grayKey string) graylb.Kind {
	switch k := md[metaKafkaKind]; {
	case strings.EqualFold(k, "gray"):
		return graylb.Gray
	case strings.EqualFold(k, "prod"):
		return graylb.Prod
	}
	return graylb.KindOf(md[grayKey])
}

// consumerGroups returns the consumer groups list's instances say they
// consume in, by name, and what to warn of under rules.
func consumerGroups(service string, list []graylb.Instance, rules graylb.Rules, grayKey string) ([]consumerGroupStatus, []string) {
	byName := map[string]*consumerGroupStatus{}
	for _, in := range list {
		name := in.Metadata[metaKafkaGroup]
		if name == "" {
			continue
		}
		g := byName[name]
		if g == nil {
			g = &consumerGroupStatus{Group: name, Topics: []string{}, GrayPartitions: []string{}}
			byName[name] = g
		}
		for _, t := range strings.Split(in.Metadata[metaKafkaTopics], ",") {
			if t != "" && !slices.Contains(g.Topics, t) {
				g.Topics = append(g.Topics, t)
			}
		}
		if consumerKind(in.Metadata, grayKey) == graylb.Gray {
			g.Gray++
		} else {
			g.Prod++
		}
		if !in.Healthy || !in.Enabled {
			g.Down++
		}
		if n := in.Metadata[metaKafkaGrayPartitions]; n != "" && !slices.Contains(g.GrayPartitions, n) {
			g.GrayPartitions = append(g.GrayPartitions, n)
		}
	}
	out := make([]consumerGroupStatus, 0, len(byName))
	var warn []string
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		g := byName[name]
		slices.Sort(g.Topics)
		slices.Sort(g.GrayPartitions)
		out = append(out, *g)
		q := strconv.Quote(name)
		if g.Gray > 0 && rules.Closed {
			warn = append(warn, fmt.Sprintf("%s: consumer group %s: the rules are closed: its %d gray consumer(s) get no partition, its prod consumers consume the gray partitions", service, q, g.Gray))
		}
		if g.Gray > 0 && g.Prod == 0 {
			warn = append(warn, fmt.Sprintf("%s: consumer group %s has gray consumers only: its prod partitions wait until a prod consumer joins", service, q))
		}
		if len(g.GrayPartitions) > 1 {
			warn = append(warn, fmt.Sprintf("%s: consumer group %s: its consumers disagree on the number of gray partitions (%s): every member must use the same", service, q, strings.Join(quoteAll(g.GrayPartitions), ", ")))
		}
	}
	return out, warn
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// printConsumers writes a service's consumer groups as a table.
func printConsumers(w io.Writer, groups []consumerGroupStatus) {
	if len(groups) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CONSUMER GROUP\tTOPICS\tPROD\tGRAY\tDOWN\tGRAY PARTITIONS")
	for _, g := range groups {
		topics := make([]string, len(g.Topics))
		for i, t := range g.Topics {
			topics[i] = printable(t)
		}
		parts := make([]string, len(g.GrayPartitions))
		for i, p := range g.GrayPartitions {
			parts[i] = printable(p)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%s\n", printable(g.Group), orDash(strings.Join(topics, ",")), g.Prod, g.Gray, g.Down, orDash(strings.Join(parts, ",")))
	}
	tw.Flush()
}
