package kafkagray_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
)

// flowRow is one line of RELIABILITY.md's table for messages.
type flowRow struct {
	flow, switchWhat           string
	produced, lost, dup, wrong int
	switchTook                 time.Duration
	dupWhy                     string
}

// flow runs one deployment flow against the broker: a fresh topic and
// group, a producer producing throughout, and run, which starts and stops
// consumers and returns what it measured. Then the producer stops, every
// record produced must be processed (0 lost), no prod record may reach a
// gray consumer and every handler's context must route as its record says
// (0 wrong kind).
func flow(t *testing.T, addr, name string, run func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func())) flowRow {
	t.Helper()
	topic := fmt.Sprintf("graylb-%s-%d", name, time.Now().UnixNano())
	createTopic(t, addr, topic)
	led := newLedger()
	p := startProducer(t, addr, topic, name, led)
	took, what, cleanup := run(t, topic, topic, led)
	led.producedAfter(t, 300, 60*time.Second) // records produced after the switch, for it to be seen on them
	p.close()
	led.drained(t, 60*time.Second)
	cleanup()
	produced, lost, dup, wrong := led.counts()
	if lost != 0 || wrong != 0 {
		t.Errorf("%s: %d produced, %d lost, %d wrong kind; want 0 lost, 0 wrong kind", name, produced, lost, wrong)
	}
	if produced < 100 {
		t.Errorf("%s: only %d records produced", name, produced)
	}
	return flowRow{flow: name, switchWhat: what, produced: produced, lost: lost, dup: dup, wrong: wrong, switchTook: took}
}

// steady waits until the group processes records of both kinds with its
// gray consumer (when it has one) holding the gray partition.
func steady(t *testing.T, led *ledger, withGray bool) {
	t.Helper()
	since := time.Now()
	led.waitFor(t, "a prod record processed", since, 60*time.Second, func(e event) bool { return !e.grayR })
	led.waitFor(t, "a gray record processed", since, 60*time.Second, func(e event) bool { return e.grayR && e.grayC == withGray })
}

func grayOnProd(e event) bool { return e.grayR && !e.grayC }

func TestKafkaFlows(t *testing.T) {
	addr := kafkaAddr(t)
	var rows []flowRow
	add := func(r flowRow, why string) { r.dupWhy = why; rows = append(rows, r) }

	t.Run("gray consumer starts", func(t *testing.T) {
		add(flow(t, addr, "start", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
			p1 := startConsumer(t, addr, topic, group, "p1", false, led)
			p2 := startConsumer(t, addr, topic, group, "p2", false, led)
			steady(t, led, false)
			t0 := time.Now()
			g := startConsumer(t, addr, topic, group, "g", true, led)
			took := led.waitFor(t, "the gray consumer processes a gray record", t0, 60*time.Second, func(e event) bool { return e.grayC })
			return took, "start until the gray consumer processed its first gray record", func() { g.close(); p1.close(); p2.close() }
		}), "each member commits what it processed before it lets a rebalance revoke its partitions (BlockRebalanceOnPoll)")
	})

	t.Run("gray consumer stops gracefully", func(t *testing.T) {
		add(flow(t, addr, "stop", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
			p1 := startConsumer(t, addr, topic, group, "p1", false, led)
			g := startConsumer(t, addr, topic, group, "g", true, led)
			steady(t, led, true)
			t0 := time.Now()
			g.close()
			took := led.waitFor(t, "prod processes gray records", t0, 60*time.Second, grayOnProd)
			return took, "stop until prod processed a gray record", p1.close
		}), "the gray consumer commits its last poll, then leaves the group")
	})

	t.Run("gray consumer killed (SIGKILL)", func(t *testing.T) {
		add(flow(t, addr, "kill", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
			p1 := startConsumer(t, addr, topic, group, "p1", false, led)
			g := startChild(t, addr, topic, group, "g", led)
			steady(t, led, true)
			t0 := time.Now()
			g.kill()
			took := led.waitFor(t, "prod processes gray records", t0, 60*time.Second, grayOnProd)
			return took, "SIGKILL until prod processed a gray record (the session timeout is 6 s)", p1.close
		}), "a record the killed consumer processed after its last commit is delivered again to prod; the child commits right after each poll, so the window is short")
	})

	t.Run("rollback (closed: true)", func(t *testing.T) {
		add(flow(t, addr, "rollback", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
			p1 := startConsumer(t, addr, topic, group, "p1", false, led)
			g := startConsumer(t, addr, topic, group, "g", true, led)
			steady(t, led, true)
			t0 := time.Now()
			for _, c := range []*consumer{p1, g} { // as a rules push reaches every process
				if err := c.lb.SetRules(graylb.Rules{Closed: true}); err != nil {
					t.Fatal(err)
				}
			}
			took := led.waitFor(t, "prod processes gray records", t0, 60*time.Second, grayOnProd)
			switched := t0.Add(took)
			// 200 gray records processed by prod after the switch, then none by the gray consumer
			if !led.until(60*time.Second, func() bool { return led.countAfter(switched, grayOnProd) >= 200 }) {
				t.Fatal("prod did not process 200 gray records within 60 s of the switch")
			}
			if at, ok := led.first(switched, func(e event) bool { return e.grayC }); ok {
				t.Errorf("the gray consumer processed a record %v after prod took over under closed rules", at.Sub(switched))
			}
			return took, "closed: true until prod processed a gray record (and the gray consumer none after)", func() { g.close(); p1.close() }
		}), "members commit before the rebalance their rules change forces")
	})

	t.Run("promotion", func(t *testing.T) {
		add(flow(t, addr, "promotion", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
			p1 := startConsumer(t, addr, topic, group, "p1", false, led)
			g := startConsumer(t, addr, topic, group, "g", true, led)
			steady(t, led, true)
			t0 := time.Now()
			g.close() // the gray build restarts as prod
			promoted := startConsumer(t, addr, topic, group, "promoted", false, led)
			took := led.waitFor(t, "prod processes gray records", t0, 60*time.Second, grayOnProd)
			led.waitFor(t, "the promoted build processes records", t0, 60*time.Second, func(e event) bool { return e.consumer == "promoted" })
			return took, "the gray build's stop until prod processed a gray record", func() { promoted.close(); p1.close() }
		}), "as a graceful stop, then a prod start")
	})

	t.Run("consumers added and removed", func(t *testing.T) {
		add(flow(t, addr, "rebalance", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
			p1 := startConsumer(t, addr, topic, group, "p1", false, led)
			g := startConsumer(t, addr, topic, group, "g", true, led)
			steady(t, led, true)
			t0 := time.Now()
			p2 := startConsumer(t, addr, topic, group, "p2", false, led)
			p3 := startConsumer(t, addr, topic, group, "p3", false, led)
			took := led.waitFor(t, "an added consumer processes records", t0, 60*time.Second, func(e event) bool { return e.consumer == "p2" || e.consumer == "p3" })
			p1.close()
			t1 := time.Now()
			led.waitFor(t, "the gray consumer processes gray records again", t1, 60*time.Second, func(e event) bool { return e.grayC })
			return took, "two prod consumers added until one processed a record (then one removed)", func() { g.close(); p2.close(); p3.close() }
		}), "every member commits before its partitions are revoked")
	})

	// Producers that are not graylb's: a plain franz-go client (Spring
	// Kafka partitions the same way: by key, else sticky at random) whose
	// gray records carry the gray header and nothing else decides their
	// partition. Each record must still reach its kind: no prod record on
	// the gray consumer, no gray record on prod while the gray consumer is
	// alive, none lost.
	t.Run("plain producer", func(t *testing.T) {
		add(plainFlow(t, addr, "plain-producer", false), "records of the other kind are produced again before their offsets are committed; a consumer that stops between the two hands the record over twice")
	})
	// An Untrusted topic: its producer tries to steer records to the gray
	// consumer (every record with gray: true, on the gray partition). All
	// are prod there: the gray consumer handles none.
	t.Run("untrusted topic, a producer steering to gray", func(t *testing.T) {
		add(plainFlow(t, addr, "untrusted-steering", true), "as for the plain producer")
	})

	if cluster := os.Getenv("GRAYLB_KAFKA_CLUSTER"); cluster != "" {
		t.Run("plain producer, a 3-broker cluster", func(t *testing.T) {
			add(plainFlow(t, cluster, "plain-producer-cluster", false), "as for the plain producer")
		})
	}

	if script := os.Getenv("GRAYLB_KAFKA_SCRIPT"); script != "" {
		t.Run("broker restart", func(t *testing.T) {
			add(flow(t, addr, "broker-restart", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
				p1 := startConsumer(t, addr, topic, group, "p1", false, led)
				g := startConsumer(t, addr, topic, group, "g", true, led)
				steady(t, led, true)
				for _, step := range []string{"stop", "start"} {
					if out, err := exec.Command(script, step).CombinedOutput(); err != nil {
						t.Fatalf("%s %s: %v\n%s", script, step, err, out)
					}
				}
				t0 := time.Now()
				took := led.waitFor(t, "gray records processed by the gray consumer after the restart", t0, 90*time.Second, func(e event) bool { return e.grayC })
				return took, "the broker answering again until the gray consumer processed a gray record", func() { g.close(); p1.close() }
			}), "the producer is idempotent (a retried write is not stored twice); a commit that failed while the broker was down delivers its records again")
		})
	}

	if cluster, script := os.Getenv("GRAYLB_KAFKA_CLUSTER"), os.Getenv("GRAYLB_KAFKA_SCRIPT"); cluster != "" && script != "" {
		t.Run("a broker of a 3-broker cluster killed", func(t *testing.T) {
			add(flow(t, cluster, "cluster-kill", func(t *testing.T, topic, group string, led *ledger) (time.Duration, string, func()) {
				p1 := startConsumer(t, cluster, topic, group, "p1", false, led)
				g := startConsumer(t, cluster, topic, group, "g", true, led)
				steady(t, led, true)
				if out, err := exec.Command(script, "cluster-node-stop", "1", "3").CombinedOutput(); err != nil {
					t.Fatalf("%s cluster-node-stop 1 3: %v\n%s", script, err, out)
				}
				t0 := time.Now()
				tookGray := led.waitFor(t, "the gray consumer processes gray records after the kill", t0, 90*time.Second, func(e event) bool { return e.grayC })
				tookProd := led.waitFor(t, "prod processes prod records after the kill", t0, 90*time.Second, func(e event) bool { return !e.grayC && !e.grayR })
				return max(tookGray, tookProd), "SIGKILL of broker 1 until both kinds were processed again", func() {
					g.close()
					p1.close()
					if out, err := exec.Command(script, "cluster-node-start", "1", "3").CombinedOutput(); err != nil {
						t.Errorf("%s cluster-node-start 1 3: %v\n%s", script, err, out)
					}
				}
			}), "commits fail while the group coordinator moves off the killed broker: the records processed meanwhile are delivered again")
		})
	}

	writeRows(t, rows)
}

// writeRows logs the table and writes it to $GRAYLB_RELIABILITY_OUT/kafka.md
// when that is set (make test-reliability gathers it into RELIABILITY.md).
func writeRows(t *testing.T, rows []flowRow) {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d (%s) | %d | %.2f s (%s) |\n",
			r.flow, r.produced, r.lost, r.dup, r.dupWhy, r.wrong, r.switchTook.Seconds(), r.switchWhat)
	}
	t.Logf("flows:\n%s", b.String())
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" && len(rows) > 0 {
		if err := os.WriteFile(filepath.Join(dir, "kafka.md"), []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// plainFlow runs a prod and a gray consumer of one group while a plain
// franz-go producer writes the topic: every third record gray (its gray
// header set by hand, its partition the client's choice), or, steering,
// every record gray and on the gray partition, with consumers whose topic
// is Untrusted. wrong counts prod records handled by the gray consumer and
// gray records handled by prod once the gray consumer was handling.
func plainFlow(t *testing.T, addr, name string, steering bool) flowRow {
	t.Helper()
	topic := fmt.Sprintf("graylb-%s-%d", name, time.Now().UnixNano())
	createTopic(t, addr, topic)
	led := newLedger()
	var opts []kafkagray.Option
	if steering {
		opts = append(opts, kafkagray.Untrusted())
	}
	p1 := startConsumer(t, addr, topic, topic, "p1", false, led, opts...)
	g := startConsumer(t, addr, topic, topic, "g", true, led, opts...)
	p := startPlainProducer(t, addr, topic, name, steering, led)
	since := time.Now()
	led.waitFor(t, "a prod record processed", since, 60*time.Second, func(e event) bool { return !e.grayR })
	if steering {
		led.producedAfter(t, 600, 60*time.Second)
	} else {
		led.waitFor(t, "a gray record processed by the gray consumer", since, 60*time.Second, func(e event) bool { return e.grayR && e.grayC })
	}
	handling := time.Now()
	led.producedAfter(t, 600, 60*time.Second)
	p.close()
	led.drained(t, 60*time.Second)
	grayOnProdAlive := led.countAfter(handling, grayOnProd)
	g.close()
	p1.close()
	produced, lost, dup, wrong := led.counts()
	onGray := led.countAfter(since, func(e event) bool { return e.grayC })
	t.Logf("%s: %d produced, %d lost, %d duplicated, %d wrong kind, %d gray records on prod while the gray consumer was alive, %d handled by the gray consumer",
		name, produced, lost, dup, wrong, grayOnProdAlive, onGray)
	if lost != 0 || wrong != 0 || grayOnProdAlive != 0 {
		t.Errorf("%s: %d produced, %d lost, %d wrong kind, %d gray records on prod while the gray consumer was alive; want 0, 0, 0",
			name, produced, lost, wrong, grayOnProdAlive)
	}
	if steering && onGray != 0 {
		t.Errorf("%s: the gray consumer handled %d records of an untrusted topic", name, onGray)
	}
	return flowRow{flow: name, switchWhat: "none: records of the other kind are produced again to their kind's partitions", produced: produced, lost: lost, dup: dup, wrong: wrong + grayOnProdAlive}
}

// startPlainProducer produces as startProducer does, with a plain franz-go
// client: no kafkagray partitioner, the gray header written by hand.
// Steering, every record is gray and goes to the last (gray) partition;
// its records are prod for the ledger (the topic is untrusted).
func startPlainProducer(t *testing.T, addr, topic, flow string, steering bool, led *ledger) *producer {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds(addr)...), kgo.RecordDeliveryTimeout(90 * time.Second), kgo.RetryTimeout(90 * time.Second)}
	if steering {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			gray := steering || i%3 == 0
			id := fmt.Sprintf("%s-%d", flow, i)
			r := &kgo.Record{Topic: topic, Value: []byte(id)}
			if gray {
				r.Headers = []kgo.RecordHeader{{Key: "gray", Value: []byte("true")}}
			}
			if steering {
				r.Partition = flowPartitions - 1
			}
			cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				if err == nil {
					led.produce(id, gray && !steering)
				}
			})
		}
		fctx, fcancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer fcancel()
		_ = cl.Flush(fctx)
	}()
	return p
}
