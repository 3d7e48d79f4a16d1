package kafkagray_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each member's State shows what the leader assigned it at the last
// rebalance, and every member learns the topic's gray partitions from the
// leader (a non-leader never sees the partition count otherwise).
func TestState_ReflectsTheAssignment(t *testing.T) {
	before := time.Now()
	got, links := balanceLinks(t, 4, member{id: "a"}, member{id: "b"}, member{id: "g", gray: true})
	for id, l := range links {
		st := l.State()
		if fmt.Sprint(st.Assigned["t"]) != fmt.Sprint(got[id]) {
			t.Errorf("%s: State.Assigned %v, the assignment %v", id, st.Assigned, got[id])
		}
		if tp := st.TopicPartitions["t"]; tp.Partitions != 4 || fmt.Sprint(tp.Gray) != "[3]" {
			t.Errorf("%s: TopicPartitions %+v, want 4 partitions, gray [3]", id, st.TopicPartitions)
		}
		if st.LastRebalance == nil || st.LastRebalance.Before(before) || st.Rebalances != 1 {
			t.Errorf("%s: last rebalance %v, %d rebalances; want one since the test began", id, st.LastRebalance, st.Rebalances)
		}
	}
	if st := links["g"].State(); st.Kind != graylb.Gray || fmt.Sprint(st.Assigned["t"]) != "[3]" {
		t.Errorf("gray member: %+v", st)
	}
	// A topic too small for a gray partition has none.
	_, links = balanceLinks(t, 1, member{id: "a"})
	if tp := links["a"].State().TopicPartitions["t"]; tp.Partitions != 1 || len(tp.Gray) != 0 {
		t.Errorf("a 1-partition topic: %+v, want no gray partition", tp)
	}
}

// Before any rebalance the state is empty, not nil, and says the rules.
func TestState_BeforeAnyRebalance(t *testing.T) {
	l := newLink(t, newLB(t, graylb.WithRules(graylb.Rules{Closed: true}), graylb.WithSelfGray(true)),
		kafkagray.WithGray(true), kafkagray.WithGroup("orders", "payments", "orders", "orders"))
	st := l.State()
	if st.Kind != graylb.Gray || !st.RulesClosed || st.Group != "orders" || fmt.Sprint(st.Topics) != "[orders payments]" ||
		st.GrayPartitions != 1 || st.LastRebalance != nil || st.Rebalances != 0 || st.Assigned == nil || st.TopicPartitions == nil {
		t.Fatalf("state %+v", st)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back kafkagray.State
	if err := json.Unmarshal(b, &back); err != nil || back.Kind != graylb.Gray {
		t.Fatalf("JSON %s: %v, kind %v", b, err, back.Kind)
	}
}

// An assignment from a leader that put no partition counts in it (an
// older kafkagray, or user data that does not parse) still counts.
func TestState_AssignmentWithoutPartitionCounts(t *testing.T) {
	for name, user := range map[string][]byte{"none": nil, "garbage": []byte("{not json"), "impossible": []byte(`{"t":[2,5]}`)} {
		t.Run(name, func(t *testing.T) {
			l := newLink(t, newLB(t))
			a := kmsg.NewConsumerMemberAssignment()
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = "t", []int32{2, 0}
			a.Topics, a.UserData = append(a.Topics, at), user
			got, err := l.Balancer().ParseSyncAssignment(a.AppendTo(nil))
			if err != nil || fmt.Sprint(got["t"]) != "[2 0]" {
				t.Fatalf("parsed %v, %v", got, err)
			}
			st := l.State()
			if fmt.Sprint(st.Assigned["t"]) != "[0 2]" || len(st.TopicPartitions) != 0 || st.Rebalances != 1 {
				t.Fatalf("state %+v", st)
			}
		})
	}
	if _, err := newLink(t, newLB(t)).Balancer().ParseSyncAssignment([]byte{0, 0, 0, 9}); err == nil {
		t.Fatal("a truncated assignment parsed")
	}
}

// fetches returns one fetch of records on topic t, partition 0.
func fetches(rs ...*kgo.Record) kgo.Fetches {
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{Partition: 0, Records: rs}}}}}}
}

type observed struct {
	topic, group   string
	kind, consumer graylb.Kind
	ok             bool
}

type recorder struct{ got []observed }

func (r *recorder) ObserveRecord(topic, group string, kind, consumer graylb.Kind, ok bool, d time.Duration) {
	if d < 0 {
		panic("negative duration")
	}
	r.got = append(r.got, observed{topic, group, kind, consumer, ok})
}

// HandleErr counts each record by its kind (prod on an Untrusted topic,
// whatever its keys) and outcome, handles every record whatever fails, and
// returns the first failure wrapped.
func TestHandleErr_CountsByKindAndOutcome(t *testing.T) {
	for _, untrusted := range []bool{false, true} {
		t.Run(fmt.Sprint("untrusted=", untrusted), func(t *testing.T) {
			rec := &recorder{}
			opts := []kafkagray.Option{kafkagray.WithRecordObserver(rec), kafkagray.WithGroup("g1", "t")}
			if untrusted {
				opts = append(opts, kafkagray.Untrusted())
			}
			l := newLink(t, newLB(t), opts...)
			boom := errors.New("boom")
			fs := fetches(record("gray", "true"), record(), record("GRAY", "TRUE"), record("gray", "yes"))
			fs[0].Topics[0].Partitions[0].Records[2].Offset = 7
			handled := 0
			err := l.HandleErr(context.Background(), fs, func(_ context.Context, r *kgo.Record) error {
				handled++
				if handled >= 3 {
					return fmt.Errorf("record %d: %w", handled, boom)
				}
				return nil
			})
			if handled != 4 || !errors.Is(err, boom) || err.Error() != "kafkagray: record t/0 at offset 7: record 3: boom" {
				t.Fatalf("handled %d, err %v", handled, err)
			}
			want := []observed{
				{"t", "g1", graylb.Gray, graylb.Prod, true},
				{"t", "g1", graylb.Prod, graylb.Prod, true},
				{"t", "g1", graylb.Gray, graylb.Prod, false},
				{"t", "g1", graylb.Prod, graylb.Prod, false},
			}
			if untrusted {
				want[0].kind, want[2].kind = graylb.Prod, graylb.Prod
			}
			if !reflect.DeepEqual(rec.got, want) {
				t.Fatalf("observed %+v\nwant %+v", rec.got, want)
			}
			c := l.State().Consumed
			if untrusted {
				if c["prod"]["ok"] != 2 || c["prod"]["failed"] != 2 {
					t.Fatalf("consumed %v", c)
				}
				return
			}
			if c["gray"]["ok"] != 1 || c["gray"]["failed"] != 1 || c["prod"]["ok"] != 1 || c["prod"]["failed"] != 1 {
				t.Fatalf("consumed %v", c)
			}
		})
	}
}

// Handle counts its records as ok, with or without an observer.
func TestHandle_CountsOk(t *testing.T) {
	rec := &recorder{}
	for _, l := range []*kafkagray.Link{newLink(t, newLB(t, graylb.WithSelfGray(true)), kafkagray.WithGray(true)), newLink(t, newLB(t, graylb.WithSelfGray(true)), kafkagray.WithGray(true), kafkagray.WithRecordObserver(rec))} {
		var seen []string
		l.Handle(context.Background(), fetches(record("gray", "true"), record()), func(ctx context.Context, r *kgo.Record) {
			seen = append(seen, (*headersOf)(r).gray())
		})
		if fmt.Sprint(seen) != "[true ]" {
			t.Fatalf("handled %v", seen)
		}
		if c := l.State().Consumed; c["gray"]["ok"] != 1 || c["prod"]["ok"] != 1 || c["gray"]["failed"]+c["prod"]["failed"] != 0 {
			t.Fatalf("consumed %v", c)
		}
	}
	want := []observed{{"t", "", graylb.Gray, graylb.Gray, true}, {"t", "", graylb.Prod, graylb.Gray, true}}
	if !reflect.DeepEqual(rec.got, want) {
		t.Fatalf("observed %+v, want %+v", rec.got, want)
	}
}

type headersOf kgo.Record

func (h *headersOf) gray() string { v, _ := header((*kgo.Record)(h), "gray"); return v }

type nopObserver struct{}

func (nopObserver) ObserveRecord(string, string, graylb.Kind, graylb.Kind, bool, time.Duration) {}

// Handling a prod record allocates nothing per record beyond what the
// fetch's iteration allocates once, with and without an observer.
func TestHandle_NoAllocationPerRecord(t *testing.T) {
	many := make([]*kgo.Record, 64)
	for i := range many {
		many[i] = record()
	}
	for _, c := range []struct {
		name string
		opts []kafkagray.Option
	}{{"no observer", nil}, {"observer", []kafkagray.Option{kafkagray.WithRecordObserver(nopObserver{})}}} {
		l := newLink(t, newLB(t), c.opts...)
		fn := func(context.Context, *kgo.Record) error { return nil }
		one, all := fetches(record()), fetches(many...)
		a1 := testing.AllocsPerRun(200, func() { _ = l.HandleErr(context.Background(), one, fn) })
		a64 := testing.AllocsPerRun(200, func() { _ = l.HandleErr(context.Background(), all, fn) })
		t.Logf("%s: %v allocations for 1 record, %v for 64", c.name, a1, a64)
		if a64 != a1 {
			t.Errorf("%s: %v allocations for 1 record, %v for 64: want no allocation per record", c.name, a1, a64)
		}
	}
}

// WithGroup refuses what Kafka or the registration metadata would not take.
func TestWithGroup_Refuses(t *testing.T) {
	long := string(make([]byte, 250))
	for _, c := range []struct {
		group  string
		topics []string
	}{
		{"", []string{"t"}},
		{"g", nil},
		{"g\n", []string{"t"}},
		{"g", []string{""}},
		{"g", []string{"a,b"}},
		{"g", []string{".."}},
		{"g", []string{"t\x00"}},
		{"g", []string{"tö"}},
		{long, []string{"t"}},
	} {
		if _, err := kafkagray.New(newLB(t), kafkagray.WithGroup(c.group, c.topics...)); !errors.Is(err, kafkagray.ErrInvalidGroup) {
			t.Errorf("WithGroup(%q, %q): %v, want ErrInvalidGroup", c.group, c.topics, err)
		}
	}
}

// Metadata names the group, its topics, the consumer's kind and its gray
// partitions; nothing without WithGroup.
func TestMetadata(t *testing.T) {
	if m := newLink(t, newLB(t)).Metadata(); m != nil {
		t.Fatalf("without a group: %v", m)
	}
	m := newLink(t, newLB(t, graylb.WithSelfGray(true)), kafkagray.WithGray(true), kafkagray.WithGrayPartitions(2),
		kafkagray.WithGroup("orders", "payments", "orders")).Metadata()
	want := map[string]string{"kafka.group": "orders", "kafka.topics": "orders,payments", "kafka.kind": "gray", "kafka.grayPartitions": "2"}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("Metadata() = %v, want %v", m, want)
	}
}
