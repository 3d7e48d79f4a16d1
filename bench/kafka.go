package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
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
// the wire as a gray record kafkagray stamps.
type KafkaCase struct {
	Name   string
	Graylb bool
	Gray   bool
}

// KafkaCases are the four cases, each plain one before its kafkagray one.
var KafkaCases = []KafkaCase{
	{"plain franz-go, prod records", false, false},
	{"kafkagray, prod records", true, false},
	{"plain franz-go, gray records", false, true},
	{"kafkagray, gray records", true, true},
}

// KafkaRound is one case's cost per record in one round: wall time and
// heap allocations (the whole process's, franz-go's included) while
// producing the round's records until the broker acknowledged them all,
// then while consuming them back until the last one was handled and its
// offset committed.
type KafkaRound struct {
	ProduceNs, ConsumeNs         float64
	ProduceAllocs, ConsumeAllocs float64
}

// TotalNs is the round's produce and consume time per record.
func (r KafkaRound) TotalNs() float64 { return r.ProduceNs + r.ConsumeNs }

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
			if r.consume, err = kafkagray.New(lb, kafkagray.WithGray(c.Gray)); err != nil {
				return nil, err
			}
			popts, copts = r.link.ClientOpts(), r.consume.ClientOpts()
			if c.Gray { // a gray request's context, as the middleware admits it
				r.ctx = r.link.Context(context.Background(), &kgo.Record{Headers: []kgo.RecordHeader{{Key: "gray", Value: []byte("true")}}})
			}
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
		order := []int{0, 1, 2, 3}
		if t%2 == 1 {
			order = []int{1, 0, 3, 2}
		}
		for _, i := range order {
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
	produceMallocs, consumeMallocs uint64
}

func (t *kafkaTurn) add(o kafkaTurn) {
	t.records += o.records
	t.produce += o.produce
	t.consume += o.consume
	t.produceMallocs += o.produceMallocs
	t.consumeMallocs += o.consumeMallocs
}

func (t kafkaTurn) perRecord() KafkaRound {
	n := float64(t.records)
	return KafkaRound{
		ProduceNs: float64(t.produce.Nanoseconds()) / n, ConsumeNs: float64(t.consume.Nanoseconds()) / n,
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
	m0, start := mallocs(), time.Now()
	for i := 0; i < n; i++ {
		rec := &kgo.Record{Topic: r.topic, Key: kafkaKeyList[i%kafkaKeys], Value: kafkaValue}
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
	res.produce, res.produceMallocs = time.Since(start), mallocs()-m0
	if p := failed.Load(); p != nil {
		return res, *p
	}

	m0, start = mallocs(), time.Now()
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
	res.consume, res.consumeMallocs = time.Since(start), mallocs()-m0
	if r.handled != n {
		return res, fmt.Errorf("%d records consumed, %d produced", r.handled, n)
	}
	return res, nil
}

// handle and handleCtx are the handlers: they count the record.
func (r *kafkaRunner) handle(*kgo.Record)                     { r.handled++ }
func (r *kafkaRunner) handleCtx(context.Context, *kgo.Record) { r.handled++ }

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// KafkaSummary is the median over rounds of each case's cost, and of the
// ratio kafkagray / plain franz-go of the same kind in the same round.
type KafkaSummary struct {
	Cases  []KafkaRound // medians, in KafkaCases' order
	Ratio  [2]float64   // total time, kafkagray / plain: prod, gray
	Rounds int
}

// SummarizeKafka takes the medians of rounds (each in KafkaCases' order).
func SummarizeKafka(rounds [][]KafkaRound) KafkaSummary {
	s := KafkaSummary{Cases: make([]KafkaRound, len(KafkaCases)), Rounds: len(rounds)}
	col := func(f func(KafkaRound) float64, i int) float64 {
		xs := make([]float64, 0, len(rounds))
		for _, r := range rounds {
			xs = append(xs, f(r[i]))
		}
		return medianOf(xs)
	}
	for i := range KafkaCases {
		s.Cases[i] = KafkaRound{
			ProduceNs:     col(func(r KafkaRound) float64 { return r.ProduceNs }, i),
			ConsumeNs:     col(func(r KafkaRound) float64 { return r.ConsumeNs }, i),
			ProduceAllocs: col(func(r KafkaRound) float64 { return r.ProduceAllocs }, i),
			ConsumeAllocs: col(func(r KafkaRound) float64 { return r.ConsumeAllocs }, i),
		}
	}
	for k := 0; k < 2; k++ {
		xs := make([]float64, 0, len(rounds))
		for _, r := range rounds {
			xs = append(xs, r[2*k+1].TotalNs()/r[2*k].TotalNs())
		}
		s.Ratio[k] = medianOf(xs)
	}
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
