package kafkagray_test

// The harness of the flows against a real broker (flows_test.go): a topic
// per flow, a producer that keeps producing gray and prod records, consumers
// of either kind in this process or in a child process (for SIGKILL), and a
// ledger of what was produced and processed by which kind.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	flowPartitions = 4 // the last one gray
	sessionTimeout = 6 * time.Second
)

// kafkaAddr returns the broker the flows run against, skipping without one.
func kafkaAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("GRAYLB_KAFKA_ADDR")
	if addr == "" {
		t.Skip("GRAYLB_KAFKA_ADDR is not set (scripts/kafka.sh start, then GRAYLB_KAFKA_ADDR=127.0.0.1:19092)")
	}
	return addr
}

// seeds are the brokers of addr, a comma-separated list.
func seeds(addr string) []string { return strings.Split(addr, ",") }

// createTopic creates topic with flowPartitions partitions, each on every
// broker of addr (at most 3).
func createTopic(t *testing.T, addr, topic string) {
	t.Helper()
	rf := int16(min(len(seeds(addr)), 3))
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(addr)...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, flowPartitions, rf
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 15000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// event is one record processed by one consumer.
type event struct {
	at         time.Time
	consumer   string
	grayC      bool // the consumer is gray
	grayR      bool // the record is gray
	routedGray bool // a pick made with the handler's context reached the gray instance
	closed     bool // the consumer's rules were closed (no request reaches gray)
	changing   bool // they opened or closed during the pick: either routing is right
}

// ledger is what a flow produced and processed.
type ledger struct {
	mu        sync.Mutex
	produced  map[string]bool // id: gray
	processed map[string]int
	events    []event
	changed   chan struct{} // closed (and replaced) at each record produced or processed
}

func newLedger() *ledger {
	return &ledger{produced: map[string]bool{}, processed: map[string]int{}, changed: make(chan struct{})}
}

func (l *ledger) produce(id string, gray bool) {
	l.mu.Lock()
	l.produced[id] = gray
	l.changedLocked()
	l.mu.Unlock()
}

func (l *ledger) process(id, consumer string, grayC, grayR, routedGray, closed, changing bool) {
	l.mu.Lock()
	l.processed[id]++
	l.events = append(l.events, event{time.Now(), consumer, grayC, grayR, routedGray, closed, changing})
	l.changedLocked()
	l.mu.Unlock()
}

// changedLocked wakes the waiters of until.
func (l *ledger) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// until waits until cond holds, checking it at each record produced or
// processed, within d, and reports whether it held. cond takes the
// ledger's lock itself (through its other methods).
func (l *ledger) until(d time.Duration, cond func() bool) bool {
	deadline := time.After(d)
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return cond()
		}
	}
}

// producedAfter waits until n more records were produced, within d.
func (l *ledger) producedAfter(t *testing.T, n int, d time.Duration) {
	t.Helper()
	count := func() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.produced) }
	want := count() + n
	if !l.until(d, func() bool { return count() >= want }) {
		t.Fatalf("%d more records produced within %v, want %d", count()-want+n, d, n)
	}
}

// countAfter returns how many events after since satisfy match.
func (l *ledger) countAfter(since time.Time, match func(event) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.at.After(since) && match(e) {
			n++
		}
	}
	return n
}

// counts returns records produced, lost (produced, never processed),
// duplicated (processings beyond the first), and wrong kind (a prod record
// processed by a gray consumer, or a handler whose context did not route
// as its record says: gray for a gray record unless the rules are closed).
func (l *ledger) counts() (produced, lost, dup, wrong int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.produced {
		if l.processed[id] == 0 {
			lost++
		}
	}
	for _, n := range l.processed {
		dup += n - 1
	}
	for _, e := range l.events {
		if (e.grayC && !e.grayR) || (!e.changing && e.routedGray != (e.grayR && !e.closed)) || (e.routedGray && !e.grayR) {
			wrong++
		}
	}
	return len(l.produced), lost, dup, wrong
}

// first returns the time of the first event after since that match
// satisfies, false when none did.
func (l *ledger) first(since time.Time, match func(event) bool) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.at.After(since) && match(e) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// waitFor waits until match holds for an event after since, within d:
// the time it took.
func (l *ledger) waitFor(t *testing.T, what string, since time.Time, d time.Duration, match func(event) bool) time.Duration {
	t.Helper()
	var at time.Time
	if !l.until(d, func() (ok bool) { at, ok = l.first(since, match); return ok }) {
		t.Fatalf("%s: not within %v", what, d)
	}
	return at.Sub(since)
}

// drained waits until every record produced was processed, within d.
func (l *ledger) drained(t *testing.T, d time.Duration) {
	t.Helper()
	lost := func() int { _, lost, _, _ := l.counts(); return lost }
	if !l.until(d, func() bool { return lost() == 0 }) {
		t.Errorf("%d records produced were not processed within %v", lost(), d)
	}
}

// flowLB is a LoadBalancer over one prod (10.0.0.1) and one gray
// (10.0.0.2) instance of "svc": a handler's pick says which kind its
// context routes as.
func flowLB(t *testing.T, opts ...graylb.Option) *graylb.LoadBalancer {
	t.Helper()
	return newLB(t, opts...)
}

func groupOpts(addr, topic, group string, link *kafkagray.Link) []kgo.Opt {
	var debug []kgo.Opt
	if os.Getenv("GRAYLB_KAFKA_DEBUG") != "" {
		debug = append(debug, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	return append(append(link.ClientOpts(), debug...),
		kgo.SeedBrokers(seeds(addr)...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(sessionTimeout), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.RetryTimeout(60*time.Second))
}

// consumer is a consumer of a flow's group in this process.
type consumer struct {
	name   string
	gray   bool
	lb     *graylb.LoadBalancer
	cl     *kgo.Client
	stop   context.CancelFunc
	done   chan struct{}
	unfoll func()
}

// startConsumer starts a consumer of kind gray: it processes each polled
// record (a pick with the handler's context, noted in the ledger), commits
// what it polled, then lets a rebalance happen.
func startConsumer(t *testing.T, addr, topic, group, name string, gray bool, led *ledger, opts ...kafkagray.Option) *consumer {
	t.Helper()
	lb := flowLB(t, graylb.WithSelfGray(gray))
	link := newLink(t, lb, opts...)
	cl, err := kgo.NewClient(groupOpts(addr, topic, group, link)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{name: name, gray: gray, lb: lb, cl: cl, stop: cancel, done: make(chan struct{}), unfoll: link.Follow(cl)}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 100)
			link.Handle(context.Background(), fs, func(hctx context.Context, r *kgo.Record) {
				before := lb.RulesState().Rules.Closed
				inst, err := lb.Pick(hctx, "svc")
				after := lb.RulesState().Rules.Closed
				led.process(string(r.Value), name, gray, isGray(r), err == nil && inst.Host == "10.0.0.2", after, before != after)
			})
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = cl.CommitUncommittedOffsets(cctx)
			ccancel()
			cl.AllowRebalance()
		}
	}()
	return c
}

// close stops the consumer gracefully: its last poll processed and
// committed, then it leaves the group.
func (c *consumer) close() {
	c.stop()
	<-c.done
	c.unfoll()
	c.cl.Close()
}

func isGray(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, "gray") {
			return strings.EqualFold(string(h.Value), "true")
		}
	}
	return false
}

// producer keeps producing, one record every 2 ms, every third one gray
// (stamped from a gray request's context), until stopped.
type producer struct {
	stop context.CancelFunc
	done chan struct{}
}

func startProducer(t *testing.T, addr, topic, flow string, led *ledger) *producer {
	t.Helper()
	link := newLink(t, flowLB(t))
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(addr)...), kgo.RecordPartitioner(link.Partitioner()),
		kgo.RecordDeliveryTimeout(90*time.Second), kgo.RetryTimeout(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	grayCtx := link.Context(context.Background(), record("gray", "true"))
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
			gray := i%3 == 0
			pctx := context.Background()
			if gray {
				pctx = grayCtx
			}
			id := fmt.Sprintf("%s-%d", flow, i)
			link.Produce(pctx, cl, &kgo.Record{Topic: topic, Value: []byte(id)}, func(r *kgo.Record, err error) {
				if err == nil {
					led.produce(id, isGray(r))
				}
			})
		}
		fctx, fcancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer fcancel()
		_ = cl.Flush(fctx)
	}()
	return p
}

func (p *producer) close() { p.stop(); <-p.done }

// child is a gray consumer in a child process (this test binary, running
// TestKafkaChildConsumer): SIGKILL ends it without leaving the group, as a
// crash does, and the group's session timeout applies.
type child struct {
	cmd  *exec.Cmd
	read chan struct{}
}

func startChild(t *testing.T, addr, topic, group, name string, led *ledger) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKafkaChildConsumer$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GRAYLB_KAFKA_CHILD="+strings.Join([]string{addr, topic, group}, ";"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, read: make(chan struct{})}
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var id string
			var grayR, routed bool
			if n, _ := fmt.Sscanf(sc.Text(), "P %s %t %t", &id, &grayR, &routed); n == 3 {
				led.process(id, name, true, grayR, routed, false, false)
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// kill sends SIGKILL and waits until the process is gone and its output
// read.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.read
	_ = c.cmd.Wait()
}

// TestKafkaChildConsumer is the child process of startChild: a gray
// consumer that prints each record it processed before committing.
func TestKafkaChildConsumer(t *testing.T) {
	spec := os.Getenv("GRAYLB_KAFKA_CHILD")
	if spec == "" {
		t.Skip("run by the SIGKILL flow only")
	}
	f := strings.Split(spec, ";")
	link := newLink(t, flowLB(t, graylb.WithSelfGray(true)), kafkagray.WithGray(true))
	lb := flowLB(t)
	cl, err := kgo.NewClient(groupOpts(f[0], f[1], f[2], link)...)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // bounded: the parent kills it long before
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		link.Handle(context.Background(), fs, func(hctx context.Context, r *kgo.Record) {
			inst, err := lb.Pick(hctx, "svc")
			fmt.Fprintf(w, "P %s %t %t\n", r.Value, isGray(r), err == nil && inst.Host == "10.0.0.2")
		})
		_ = w.Flush()
		_ = cl.CommitUncommittedOffsets(ctx)
		cl.AllowRebalance()
	}
}
