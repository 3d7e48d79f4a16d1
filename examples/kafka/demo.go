package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitions of the demo's topic: the last one is gray (kafkagray's
// default, WithGrayPartitions(1)).
const partitions = 2

// handling is what happened to one record.
type handling struct {
	recordGray   string // the record's gray header as the consumer got it
	consumer     string
	consumerGray bool
	backend      string // the stock-service instance its call reached
	backendGray  bool
}

// demo is the running example: stock-service's two instances, the two
// consumers, the edge and its producer, and the topic.
type demo struct {
	topic     string
	edge      string // http://host:port/
	client    *http.Client
	producer  *kgo.Client
	nextID    atomic.Int64
	grayReady chan struct{} // closed when the gray consumer holds the gray partition
	mu        sync.Mutex
	done      map[string]handling // by record id
	changed   chan struct{}       // closed and replaced on each handling
	closers   []func()
}

func (d *demo) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// backends are stock-service's instances, by name: their kind.
var backends = map[string]bool{"stock-prod": false, "stock-gray": true}

func newDemo(ctx context.Context, brokers []string) (_ *demo, err error) {
	d := &demo{
		topic:     "graylb-example-orders-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		grayReady: make(chan struct{}),
		done:      map[string]handling{},
		changed:   make(chan struct{}),
		client:    &http.Client{Timeout: 10 * time.Second},
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	reg := graylb.NewRegistry()
	// Each service has a LoadBalancer of its own, as a separate process would.
	newLB := func(opts ...graylb.Option) (*graylb.LoadBalancer, error) {
		lb, err := graylb.New(reg, opts...)
		if err == nil {
			d.closers = append(d.closers, func() { lb.Close() })
		}
		return lb, err
	}

	// stock-service: each instance answers with its name.
	for name, gray := range backends {
		lb, err := newLB()
		if err != nil {
			return nil, err
		}
		h := httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, name)
		}))
		port, err := d.serve(h)
		if err != nil {
			return nil, err
		}
		if err := reg.Register(graylb.NewInstance("stock-service", "127.0.0.1", port, map[string]string{"gray": strconv.FormatBool(gray)})); err != nil {
			return nil, err
		}
	}

	// The edge: a LoadBalancer, its Link and a producing client.
	edgeLB, err := newLB()
	if err != nil {
		return nil, err
	}
	edgeLink, err := kafkagray.New(edgeLB)
	if err != nil {
		return nil, err
	}
	d.producer, err = kgo.NewClient(append(edgeLink.ClientOpts(), kgo.SeedBrokers(brokers...))...)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, d.producer.Close)
	if err := createTopic(ctx, d.producer, d.topic); err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { deleteTopic(d.producer, d.topic) })
	port, err := d.serve(httpctx.Middleware(edgeLB)(d.orders(edgeLink)))
	if err != nil {
		return nil, err
	}
	d.edge = fmt.Sprintf("http://127.0.0.1:%d/orders", port)

	// order-consumer: one prod and one gray consumer in one group.
	for _, gray := range []bool{false, true} {
		if err := d.consume(brokers, newLB, gray); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// serve serves h on a free loopback port until the demo closes.
func (d *demo) serve(h http.Handler) (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	d.closers = append(d.closers, func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// orders is the edge's handler: one record per request, produced with the
// request's context, its id in the response.
func (d *demo) orders(link *kafkagray.Link) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "order-" + strconv.FormatInt(d.nextID.Add(1), 10)
		rec := &kgo.Record{Topic: d.topic, Value: []byte(id)}
		link.Stamp(r.Context(), rec) // the request's gray header, as the middleware admitted it
		if err := d.producer.ProduceSync(r.Context(), rec).FirstErr(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, id)
	})
}

// consume starts one consumer of the group, of the given kind: its own
// LoadBalancer and Link, a client, and a loop that handles each record by
// calling stock-service with the record's context.
func (d *demo) consume(brokers []string, newLB func(...graylb.Option) (*graylb.LoadBalancer, error), gray bool) error {
	name := "consumer-" + kind(gray)
	lb, err := newLB(graylb.WithSelfGray(gray)) // the process's kind, said once
	if err != nil {
		return err
	}
	link, err := kafkagray.New(lb) // its consumers are of lb's kind
	if err != nil {
		return err
	}
	opts := append(link.ClientOpts(),
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(d.topic), kgo.ConsumeTopics(d.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
	)
	if gray {
		opts = append(opts, kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			for _, p := range a[d.topic] {
				if p == partitions-1 {
					d.markGrayReady()
				}
			}
		}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	stopFollow := link.Follow(cl)
	calls := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 100)
			if fs.IsClientClosed() {
				return
			}
			link.Handle(ctx, fs, func(ctx context.Context, r *kgo.Record) {
				d.handle(ctx, calls, name, gray, r)
			})
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				fmt.Printf("   %s: commit: %v (the records are delivered again)\n", name, err)
			}
			cl.AllowRebalance()
		}
	}()
	d.closers = append(d.closers, func() {
		cancel()
		<-stopped
		stopFollow()
		cl.Close() // leaves the group
	})
	return nil
}

func (d *demo) markGrayReady() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.grayReady:
	default:
		close(d.grayReady)
	}
}

// handle is the consumers' handler: it calls stock-service with the
// record's context (ctx, from Link.Handle) and notes who served it.
func (d *demo) handle(ctx context.Context, calls *http.Client, consumer string, gray bool, r *kgo.Record) {
	h := handling{consumer: consumer, consumerGray: gray}
	for _, kv := range r.Headers {
		if strings.EqualFold(kv.Key, "gray") {
			h.recordGray = string(kv.Value)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://stock-service/reserve", nil)
	resp, err := calls.Do(req)
	if err != nil {
		h.backend = "error: " + err.Error()
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h.backend, h.backendGray = string(b), backends[string(b)]
	}
	d.mu.Lock()
	d.done[string(r.Value)] = h
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// waitAssigned waits until the group gave the gray partition to the gray
// consumer: until then a gray record would go to the prod consumer, as it
// does whenever no gray consumer is alive.
func (d *demo) waitAssigned(ctx context.Context) error {
	select {
	case <-d.grayReady:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the gray consumer got no gray partition: %w", ctx.Err())
	}
}

// send sends one request to the edge and returns its record's id.
func (d *demo) send(ctx context.Context, gray string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.edge, nil)
	if err != nil {
		return "", err
	}
	if gray != "" {
		req.Header.Set("gray", gray)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("edge: status %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}

// handled waits until the record id was handled, at most 30 s.
func (d *demo) handled(ctx context.Context, id string) (handling, error) {
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		h, ok := d.done[id]
		changed := d.changed
		d.mu.Unlock()
		if ok {
			return h, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return handling{}, errors.New("not handled within 30 s")
		case <-ctx.Done():
			return handling{}, fmt.Errorf("not handled: %w", ctx.Err())
		}
	}
}

// createTopic creates the demo's topic.
func createTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
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

// deleteTopic deletes the demo's topic, best effort.
func deleteTopic(cl *kgo.Client, topic string) {
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
