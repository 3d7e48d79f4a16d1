// Command kafka shows full-link gray through Apache Kafka with graylb's
// kafkagray: a request's kind survives the queue.
//
//	client ─▶ edge (HTTP) ─▶ record ─▶ order-consumer (1 prod, 1 gray) ─▶ stock-service (1 prod, 1 gray)
//
// The edge serves HTTP behind graylb's middleware and produces one record
// per request with the request's context (kafkagray stamps its routing
// state on the record's headers and partitions it by kind). Two consumers
// of one group, a prod one and a gray one, each with a Link of its own
// kind, handle the records; each handler calls stock-service over HTTP
// through graylb's Transport with the record's context. The program sends
// a few requests (gray: true, gray: false, no header), prints which
// consumer and which stock-service instance handled each, and exits 1 if
// any went to the wrong kind.
//
// It needs a Kafka broker (make demo-kafka starts one):
//
//	go run ./kafka -brokers 127.0.0.1:19092   # from examples/
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// scenario is one request the program sends: its gray header, if any.
type scenario struct {
	header string // "" sends none
	gray   bool   // the kind the request, its record and its calls must keep
}

var scenarios = []scenario{
	{"true", true}, {"false", false}, {"", false},
	{"true", true}, {"", false}, {"false", false},
}

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `Usage: kafka [-brokers host:port[,host:port...]] [-timeout d]

Runs graylb's Kafka demo against a broker and exits: an HTTP edge produces a
record per request with the request's context (kafkagray), a consumer group of
one prod and one gray consumer handles the records, and each handler calls
stock-service (one prod, one gray instance) over HTTP with the record's
context. It creates a topic of its own (deleted at the end), sends requests
with gray: true, gray: false and no header, and prints which consumer and
which stock-service instance handled each (exit status 1 if one went to the
wrong kind). make demo-kafka starts a broker and runs it.

`)
		flag.PrintDefaults()
	}
	c := config{brokers: defaultBrokers(), timeout: 60 * time.Second}
	flag.StringVar(&c.brokers, "brokers", c.brokers, "the Kafka brokers, comma-separated (default 127.0.0.1:$KAFKA_PORT, KAFKA_PORT 19092)")
	flag.DurationVar(&c.timeout, "timeout", c.timeout, "how long the whole run may take")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	// Rebalances and reconnects log at warning level; the demo prints its own lines.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kafka example:", err)
		os.Exit(1)
	}
}

type config struct {
	brokers string
	timeout time.Duration
}

// defaultBrokers is the broker of scripts/kafka.sh: 127.0.0.1:$KAFKA_PORT.
func defaultBrokers() string {
	port := os.Getenv("KAFKA_PORT")
	if port == "" {
		port = "19092"
	}
	return "127.0.0.1:" + port
}

// parseBrokers checks the -brokers list: host:port entries, comma-separated.
func parseBrokers(s string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(s, ",") {
		b = strings.TrimSpace(b)
		host, port, ok := strings.Cut(b, ":")
		if !ok || host == "" || port == "" || strings.ContainsAny(b, " /") {
			return nil, fmt.Errorf("-brokers: %q is not host:port", b)
		}
		out = append(out, b)
	}
	return out, nil
}

// run starts the demo, sends every scenario, prints what handled each and
// checks the kinds.
func run(ctx context.Context, c config, out io.Writer) error {
	brokers, err := parseBrokers(c.brokers)
	if err != nil {
		return err
	}
	start := time.Now()
	d, err := newDemo(ctx, brokers)
	if err != nil {
		return err
	}
	defer d.close()
	fmt.Fprintf(out, "topic %s (2 partitions, the last gray) on %s\n", d.topic, strings.Join(brokers, ","))
	fmt.Fprintln(out, "waiting for the group to assign the gray partition to the gray consumer ...")
	if err := d.waitAssigned(ctx); err != nil {
		return err
	}

	fmt.Fprintf(out, "\n== requests through the edge, each produced as a record and consumed\n")
	fmt.Fprintf(out, "   %-3s %-16s %-13s %-26s %-26s\n", "#", "request header", "record gray", "handled by", "its call served by")
	var wrong []string
	for i, s := range scenarios {
		id, err := d.send(ctx, s.header)
		if err != nil {
			return fmt.Errorf("request %d: %w", i+1, err)
		}
		h, err := d.handled(ctx, id)
		if err != nil {
			return fmt.Errorf("request %d (record %s): %w", i+1, id, err)
		}
		fmt.Fprintf(out, "   %-3d %-16s %-13s %-26s %-26s\n", i+1, showHeader(s.header), showValue(h.recordGray), kindName(h.consumer, h.consumerGray), kindName(h.backend, h.backendGray))
		if h.consumerGray != s.gray || h.backendGray != s.gray {
			wrong = append(wrong, fmt.Sprintf("request %d (%s): want %s, handled by %s, its call served by %s",
				i+1, showHeader(s.header), kind(s.gray), kindName(h.consumer, h.consumerGray), kindName(h.backend, h.backendGray)))
		}
	}
	fmt.Fprintln(out, "\n== check: a gray request's record is handled by the gray consumer, whose call reaches gray stock-service;")
	fmt.Fprintln(out, "   every other record by the prod consumer, whose call reaches prod")
	fmt.Fprintf(out, "finished in %v\n", time.Since(start).Round(time.Millisecond))
	if len(wrong) > 0 {
		for _, w := range wrong {
			fmt.Fprintln(out, "   wrong kind:", w)
		}
		fmt.Fprintln(out, "kinds: FAIL")
		return fmt.Errorf("%d of %d records went to the wrong kind", len(wrong), len(scenarios))
	}
	fmt.Fprintln(out, "kinds: PASS")
	return nil
}

func kind(gray bool) string {
	if gray {
		return "gray"
	}
	return "prod"
}

func kindName(name string, gray bool) string { return name + " (" + kind(gray) + ")" }

func showHeader(v string) string {
	if v == "" {
		return "(none)"
	}
	return "gray: " + v
}

func showValue(v string) string {
	if v == "" {
		return "(no header)"
	}
	return v
}
