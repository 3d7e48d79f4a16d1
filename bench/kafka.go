package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What the Kafka comparison runs: records produced and consumed back
// through a real broker, with plain franz-go and through kafkagray, prod
// records and gray records apart.
const (
	// KafkaPartitions is each topic's partition count (kafkagray keeps the
	// last one for gray records).
	KafkaPartitions = 4
	kafkaKeys       = 1000 // distinct record keys
	kafkaValueSize  = 100  // bytes of each record's value
)

// KafkaCase is one way of producing and consuming: plain franz-go (its
// default partitioner and group balancer, a handler that gets the
// record) or kafkagray (its partitioner and balancer, Stamp on produce,
// Link.Handle on consume); prod records or gray ones. A plain gray record
// carries the gray header its producer wrote by hand: the same bytes on
// the wire as a gray record kafkagray stamps. OnePartition produces every
// record to the topic's last partition, as kafkagray lays out gray
// records (its gray partition).
type KafkaCase struct {
	Name         string
	Graylb       bool
	Gray         bool
	OnePartition bool
	Base         int // the case its ratio is to, an index into KafkaCases
}

// KafkaCases are the cases: plain and kafkagray for prod records, then
// for gray records, then plain gray records on one partition.
var KafkaCases = []KafkaCase{
	{Name: "plain franz-go, prod records", Base: 0},
	{Name: "kafkagray, prod records", Graylb: true, Base: 0},
	{Name: "plain franz-go, gray records", Gray: true, Base: 2},
	{Name: "kafkagray, gray records", Graylb: true, Gray: true, Base: 2},
	{Name: "plain franz-go, gray records on one partition", Gray: true, OnePartition: true, Base: 2},
}

// kafkaTurnOrder is the order of the cases in a turn, the other one
// every other turn: plain and kafkagray of a kind take turns.
var kafkaTurnOrder = [2][]int{{0, 1, 2, 3, 4}, {1, 0, 4, 3, 2}}

// KafkaRound is one case's cost per record in one round: wall time, the
// process's CPU time (user and system: franz-go's, the module's and the
// harness's, not the broker's) and heap allocations (the whole
// process's), while producing the round's records until the broker
// acknowledged them all, then while consuming them back until the last
// one was handled and its offset committed.
type KafkaRound struct {
	ProduceNs, ConsumeNs         float64
	ProduceCPUNs, ConsumeCPUNs   float64
	ProduceAllocs, ConsumeAllocs float64
}

// TotalNs is the round's produce and consume time per record.
func (r KafkaRound) TotalNs() float64 { return r.ProduceNs + r.ConsumeNs }

// TotalCPUNs is the round's produce and consume CPU time per record.
func (r KafkaRound) TotalCPUNs() float64 { return r.ProduceCPUNs + r.ConsumeCPUNs }

// KafkaBench holds, per case, a topic, a producing client and a consumer
// group's member that stays in its group from round to round.
type KafkaBench struct {
	records int // per case and round
	batch   int // records per case in a turn
	runners []*kafkaRunner
	closers []func()
}

type kafkaRunner struct {
	c        KafkaCase
	topic    string
	producer *kgo.Client
	consumer *kgo.Client
	link     *kafkagray.Link // the producer's; nil for plain franz-go
	consume  *kafkagray.Link // the consumer's
	ctx      context.Context // the producer's: a gray request's for gray kafkagray records
	handled  int
}

// NewKafkaBench creates a topic per case on brokers (deleted by Close),
// starts each case's clients, and runs a warm-up turn of each (the group
// joins, connections open). A round is records records per case, in
// turns of batch records (at most records) that alternate plain and
// kafkagray: the machine's drift falls on both alike.
func NewKafkaBench(ctx context.Context, brokers []string, records, batch int) (_ *KafkaBench, err error) {
	if records < 1 || batch < 1 {
		return nil, fmt.Errorf("bench: %d records per round in batches of %d, want at least 1 of each", records, batch)
	}
	k := &KafkaBench{records: records, batch: min(batch, records)}
	defer func() {
		if err != nil {
			k.Close()
		}
	}()
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		return nil, err
	}
	k.closers = append(k.closers, func() { lb.Close() })
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i, c := range KafkaCases {
		r := &kafkaRunner{c: c, topic: fmt.Sprintf("graylb-bench-%d-%s", i, suffix), ctx: context.Background()}
		var popts, copts []kgo.Opt
		if c.Graylb {
			if r.link, err = kafkagray.New(lb); err != nil {
				return nil, err
			}
			clb, err := graylb.New(graylb.NewRegistry(), graylb.WithSelfGray(c.Gray)) // the consumers' process
			if err != nil {
				return nil, err
			}
			k.closers = append(k.closers, func() { clb.Close() })
			if r.consume, err = kafkagray.New(clb); err != nil {
				return nil, err
			}
			popts, copts = r.link.ClientOpts(), r.consume.ClientOpts()
			if c.Gray { // a gray request's context, as the middleware admits it
				r.ctx = r.link.Context(context.Background(), &kgo.Record{Headers: []kgo.RecordHeader{{Key: "gray", Value: []byte("true")}}})
			}
		}
		if c.OnePartition { // Record.Partition, set on every record, is the partition
			popts = append(popts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		}
		if r.producer, err = kgo.NewClient(append(popts, kgo.SeedBrokers(brokers...))...); err != nil {
			return nil, err
		}
		k.closers = append(k.closers, r.producer.Close)
		if err := kafkaCreateTopic(ctx, r.producer, r.topic); err != nil {
			return nil, err
		}
		topic, producer := r.topic, r.producer
		k.closers = append(k.closers, func() { kafkaDeleteTopic(producer, topic) })
		r.consumer, err = kgo.NewClient(append(copts, kgo.SeedBrokers(brokers...),
			kgo.ConsumerGroup(r.topic), kgo.ConsumeTopics(r.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())...)
		if err != nil {
			return nil, err
		}
		k.closers = append(k.closers, r.consumer.Close)
		k.runners = append(k.runners, r)
	}
	for _, r := range k.runners {
		if _, err := r.turn(ctx, k.batch); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", r.c.Name, err)
		}
	}
	return k, nil
}

// Close stops the clients and deletes the topics.
func (k *KafkaBench) Close() {
	for i := len(k.closers) - 1; i >= 0; i-- {
		k.closers[i]()
	}
	k.closers = nil
}

// Round runs one round of every case: turns of each case's batch, plain
// and kafkagray alternating (the order reversed every other turn), until
// each case produced and consumed its records. It returns each case's
// cost per record in KafkaCases' order.
func (k *KafkaBench) Round(ctx context.Context) ([]KafkaRound, error) {
	sum := make([]kafkaTurn, len(k.runners))
	for done, t := 0, 0; done < k.records; t++ {
		n := min(k.batch, k.records-done)
		for _, i := range kafkaTurnOrder[t%2] {
			r, err := k.runners[i].turn(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.runners[i].c.Name, err)
			}
			sum[i].add(r)
		}
		done += n
	}
	out := make([]KafkaRound, len(sum))
	for i, t := range sum {
		out[i] = t.perRecord()
	}
	return out, nil
}

// kafkaTurn is what one or more turns took.
type kafkaTurn struct {
	records                        int
	produce, consume               time.Duration
	produceCPU, consumeCPU         time.Duration
	produceMallocs, consumeMallocs uint64
}

func (t *kafkaTurn) add(o kafkaTurn) {
	t.records += o.records
	t.produce += o.produce
	t.consume += o.consume
	t.produceCPU += o.produceCPU
	t.consumeCPU += o.consumeCPU
	t.produceMallocs += o.produceMallocs
	t.consumeMallocs += o.consumeMallocs
}

func (t kafkaTurn) perRecord() KafkaRound {
	n := float64(t.records)
	return KafkaRound{
		ProduceNs: float64(t.produce.Nanoseconds()) / n, ConsumeNs: float64(t.consume.Nanoseconds()) / n,
		ProduceCPUNs: float64(t.produceCPU.Nanoseconds()) / n, ConsumeCPUNs: float64(t.consumeCPU.Nanoseconds()) / n,
		ProduceAllocs: float64(t.produceMallocs) / n, ConsumeAllocs: float64(t.consumeMallocs) / n,
	}
}

var (
	kafkaValue    = make([]byte, kafkaValueSize)
	kafkaGrayTrue = []byte("true")
	kafkaKeyList  = func() [][]byte {
		ks := make([][]byte, kafkaKeys)
		for i := range ks {
			ks[i] = []byte("order-" + strconv.Itoa(i))
		}
		return ks
	}()
)

// turn produces n records and consumes them back.
func (r *kafkaRunner) turn(ctx context.Context, n int) (kafkaTurn, error) {
	res := kafkaTurn{records: n}
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	m0, c0, start := mallocs(), cpuTime(), time.Now()
	for i := 0; i < n; i++ {
		rec := &kgo.Record{Topic: r.topic, Key: kafkaKeyList[i%kafkaKeys], Value: kafkaValue}
		if r.c.OnePartition {
			rec.Partition = KafkaPartitions - 1
		}
		switch {
		case r.link != nil:
			r.link.Produce(r.ctx, r.producer, rec, promise)
		case r.c.Gray:
			rec.Headers = []kgo.RecordHeader{{Key: "gray", Value: kafkaGrayTrue}}
			r.producer.Produce(ctx, rec, promise)
		default:
			r.producer.Produce(ctx, rec, promise)
		}
	}
	if err := r.producer.Flush(ctx); err != nil {
		return res, err
	}
	res.produce, res.produceCPU, res.produceMallocs = time.Since(start), cpuTime()-c0, mallocs()-m0
	if p := failed.Load(); p != nil {
		return res, *p
	}

	m0, c0, start = mallocs(), cpuTime(), time.Now()
	r.handled = 0
	for r.handled < n {
		fs := r.consumer.PollRecords(ctx, n-r.handled)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return res, fmt.Errorf("%d of %d records consumed: %w", r.handled, n, errors.Join(ctx.Err(), kgo.ErrClientClosed))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return res, fmt.Errorf("fetch: %w", errs[0].Err)
		}
		if r.consume != nil {
			r.consume.Handle(ctx, fs, r.handleCtx)
		} else {
			fs.EachRecord(r.handle)
		}
		if err := r.consumer.CommitUncommittedOffsets(ctx); err != nil {
			return res, fmt.Errorf("commit: %w", err)
		}
	}
	res.consume, res.consumeCPU, res.consumeMallocs = time.Since(start), cpuTime()-c0, mallocs()-m0
	if r.handled != n {
		return res, fmt.Errorf("%d records consumed, %d produced", r.handled, n)
	}
	return res, nil
}

// handle and handleCtx are the handlers: they count the record.
func (r *kafkaRunner) handle(*kgo.Record)                     { r.handled++ }
func (r *kafkaRunner) handleCtx(context.Context, *kgo.Record) { r.handled++ }

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// KafkaSummary is the median over rounds of each case's cost, and of the
// ratio of its time to its base case's (KafkaCase.Base) in the same round.
type KafkaSummary struct {
	Cases    []KafkaRound // medians, in KafkaCases' order
	Ratio    []float64    // wall time over the base case's, per case
	CPURatio []float64    // CPU time over the base case's, per case
	// GrayLayout is kafkagray's gray records against plain franz-go's on
	// one partition: wall and CPU time.
	GrayLayout, GrayLayoutCPU float64
	Rounds                    int
}

// SummarizeKafka takes the medians of rounds (each in KafkaCases' order).
func SummarizeKafka(rounds [][]KafkaRound) KafkaSummary {
	n := len(KafkaCases)
	s := KafkaSummary{Cases: make([]KafkaRound, n), Ratio: make([]float64, n), CPURatio: make([]float64, n), Rounds: len(rounds)}
	over := func(f func([]KafkaRound) float64) float64 {
		xs := make([]float64, 0, len(rounds))
		for _, r := range rounds {
			xs = append(xs, f(r))
		}
		return medianOf(xs)
	}
	for i, c := range KafkaCases {
		s.Cases[i] = KafkaRound{
			ProduceNs:     over(func(r []KafkaRound) float64 { return r[i].ProduceNs }),
			ConsumeNs:     over(func(r []KafkaRound) float64 { return r[i].ConsumeNs }),
			ProduceCPUNs:  over(func(r []KafkaRound) float64 { return r[i].ProduceCPUNs }),
			ConsumeCPUNs:  over(func(r []KafkaRound) float64 { return r[i].ConsumeCPUNs }),
			ProduceAllocs: over(func(r []KafkaRound) float64 { return r[i].ProduceAllocs }),
			ConsumeAllocs: over(func(r []KafkaRound) float64 { return r[i].ConsumeAllocs }),
		}
		s.Ratio[i] = over(func(r []KafkaRound) float64 { return r[i].TotalNs() / r[c.Base].TotalNs() })
		s.CPURatio[i] = over(func(r []KafkaRound) float64 { return r[i].TotalCPUNs() / r[c.Base].TotalCPUNs() })
	}
	s.GrayLayout = over(func(r []KafkaRound) float64 { return r[3].TotalNs() / r[4].TotalNs() })
	s.GrayLayoutCPU = over(func(r []KafkaRound) float64 { return r[3].TotalCPUNs() / r[4].TotalCPUNs() })
	return s
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func kafkaCreateTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, KafkaPartitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 15000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

func kafkaDeleteTopic(cl *kgo.Client, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{topic}
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = &topic
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 10000
	_, _ = req.RequestWith(ctx, cl)
}
