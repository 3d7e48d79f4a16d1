package docs

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// docs/kafka.md: an HTTP edge produces a record while it serves a gray
// request; the record lands on the gray partition and its consumer's
// handler routes gray. Against a broker when GRAYLB_KAFKA_ADDR is set
// (make test), else the same path without one (Stamp, the partitioner,
// Context).
func TestKafkaTour(t *testing.T) {
	reg := graylb.NewRegistry()
	if err := reg.Register(graylb.NewInstance("inventory", "10.0.0.1", 80, nil)); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(graylb.NewInstance("inventory", "10.0.0.2", 80, map[string]string{"gray": "true"})); err != nil {
		t.Fatal(err)
	}
	gray := false
	lb, err := graylb.New(reg, graylb.WithSelfGray(gray)) // gray: this process's own flag, said once
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	addr := os.Getenv("GRAYLB_KAFKA_ADDR")
	topic, group := fmt.Sprintf("orders-%d", time.Now().UnixNano()), "inventory"
	if addr == "" {
		addr = "127.0.0.1:1" // nothing listens: the client is made, never used
	} else {
		createDocsTopic(t, addr, topic)
	}

	// snippet: kafka-link
	link, err := kafkagray.New(lb) // its consumers are of lb's kind (graylb.WithSelfGray)
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(append(link.ClientOpts(), // the gray-aware partitioner and group balancer
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
	)...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	defer link.Follow(cl)() // closed: true (and back) makes the group rebalance
	// end snippet

	var produced *kgo.Record
	// snippet: kafka-produce
	orders := func(w http.ResponseWriter, r *http.Request) {
		rec := &kgo.Record{Topic: topic, Value: []byte("order 42")}
		link.Stamp(r.Context(), rec) // the request's gray, user, version: as decided at the edge
		if err := cl.ProduceSync(r.Context(), rec).FirstErr(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
	// end snippet
	edge := httptest.NewServer(httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if os.Getenv("GRAYLB_KAFKA_ADDR") != "" {
			orders(w, r)
			return
		}
		rec := &kgo.Record{Topic: topic}
		link.Stamp(r.Context(), rec) // without a broker: stamp only
		produced = rec
		w.WriteHeader(http.StatusAccepted)
	})))
	defer edge.Close()
	req, _ := http.NewRequest(http.MethodPost, edge.URL, nil)
	req.Header.Set("gray", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("edge answered %d", resp.StatusCode)
	}

	picked := make(chan string, 1)
	handle := func(ctx context.Context, r *kgo.Record) {
		inst, err := lb.Pick(ctx, "inventory") // a call the handler makes: it keeps the record's kind
		if err == nil {
			select {
			case picked <- inst.Host:
			default:
			}
		}
	}
	if os.Getenv("GRAYLB_KAFKA_ADDR") == "" {
		if p := link.Partitioner().ForTopic(topic).Partition(produced, 4); p != 3 {
			t.Fatalf("the gray request's record went to partition %d of 4, want 3", p)
		}
		handle(link.Context(context.Background(), produced), produced)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// The group's only member is prod: the gray partition falls back to it.
		for len(picked) == 0 && ctx.Err() == nil {
			// snippet: kafka-consume
			fetches := cl.PollRecords(ctx, 100)
			link.Handle(ctx, fetches, handle) // each record's handler gets the record's routing state
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				log.Printf("commit: %v", err) // the records are delivered again: handlers must be idempotent
			}
			cl.AllowRebalance() // revocations wait until what was polled is committed
			// end snippet
		}
	}
	select {
	case host := <-picked:
		if host != "10.0.0.2" {
			t.Fatalf("the gray record's handler picked %s, want the gray instance", host)
		}
	default:
		t.Fatal("no record handled")
	}

	// snippet: kafka-untrusted
	external, err := kafkagray.New(lb, kafkagray.Untrusted()) // records written by producers outside the boundary
	// end snippet
	if err != nil {
		t.Fatal(err)
	}
	forged := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "Gray", Value: []byte("true")}}}
	if inst, err := lb.Pick(external.Context(context.Background(), forged), "inventory"); err != nil || inst.Host != "10.0.0.1" {
		t.Fatalf("an untrusted record's handler picked %v, %v: want prod", inst.Host, err)
	}
}

func createDocsTopic(t *testing.T, addr, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 4, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 15000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
}
