package docs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/kafkagray"
	"github.com/graylb/graylb/nacos"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// otelgraylb's RecordMetrics is a kafkagray.RecordObserver, though
// neither module imports the other.
var _ kafkagray.RecordObserver = (*otelgraylb.RecordMetrics)(nil)

// docs/kafka.md, "Seeing consumers": records handled counted in the
// metrics and the Link's state, the state on the debug page, and the
// registration metadata graylb status reads. Against a broker when
// GRAYLB_KAFKA_ADDR is set (this member's assignment then shows in the
// state), else on records made here.
func TestKafkaSeen(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	addr := os.Getenv("GRAYLB_KAFKA_ADDR")
	topic := fmt.Sprintf("orders-seen-%d", time.Now().UnixNano())
	if addr == "" {
		addr = "127.0.0.1:1" // nothing listens: the client is made, never used
	} else {
		createDocsTopic(t, addr, topic)
	}

	// snippet: kafka-seen
	records, err := otelgraylb.RecordObserver(provider.Meter(otelgraylb.ScopeName)) // graylb.consumer.record.duration
	if err != nil {
		log.Fatal(err)
	}
	link, err := kafkagray.New(lb, // its consumers are of lb's kind (graylb.WithSelfGray)
		kafkagray.WithGroup("billing", topic), // the group this process consumes in, and its topics
		kafkagray.WithRecordObserver(records))
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(append(link.ConsumerOpts(), // ClientOpts, the group and its topics
		kgo.SeedBrokers(addr), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	debug := debugpage.Handler(lb, debugpage.WithSection("kafka consumer", func() any { return link.State() }))
	// end snippet

	failed := errors.New("payment refused")
	process := func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "refused" {
			return failed
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var fetches kgo.Fetches
	if os.Getenv("GRAYLB_KAFKA_ADDR") == "" {
		rs := []*kgo.Record{{Topic: topic, Value: []byte("ok")}, {Topic: topic, Value: []byte("refused")},
			{Topic: topic, Value: []byte("ok"), Headers: []kgo.RecordHeader{{Key: "gray", Value: []byte("true")}}}}
		fetches = kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{Records: rs}}}}}}
	} else {
		gr := &kgo.Record{Topic: topic, Value: []byte("ok")}
		link.Stamp(graylb.WithValue(ctx, "gray", "true"), gr) // a gray request's record
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("ok")}, &kgo.Record{Topic: topic, Value: []byte("refused")}, gr).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	handled := 0
	for handled < 3 && ctx.Err() == nil {
		if os.Getenv("GRAYLB_KAFKA_ADDR") != "" {
			fetches = cl.PollRecords(ctx, 100)
		}
		handled += len(fetches.Records())
		// snippet: kafka-handle-err
		err := link.HandleErr(ctx, fetches, process) // a record whose process returns an error counts as failed
		if err != nil {
			log.Printf("handle: %v", err) // the first failure; every record was handled
		}
		// end snippet
		if err != nil && !errors.Is(err, failed) {
			t.Fatal(err)
		}
		cl.AllowRebalance()
	}
	if handled != 3 {
		t.Fatalf("%d records handled, want 3", handled)
	}

	// The metric: by topic, group, record kind, consumer kind, outcome.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == otelgraylb.MetricRecordDuration {
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					kind, _ := dp.Attributes.Value(otelgraylb.AttrKind)
					out, _ := dp.Attributes.Value(otelgraylb.AttrRecordOutcome)
					group, _ := dp.Attributes.Value(otelgraylb.AttrGroup)
					counts[kind.AsString()+"/"+out.AsString()+"/"+group.AsString()] += dp.Count
				}
			}
		}
	}
	if want := map[string]uint64{"prod/ok/billing": 1, "prod/failed/billing": 1, "gray/ok/billing": 1}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("record counts %v, want %v", counts, want)
	}

	// The debug page's section.
	rec := httptest.NewRecorder()
	debug.ServeHTTP(rec, httptest.NewRequest("GET", "/?format=json", nil))
	var page debugpage.State
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || len(page.Sections) != 1 {
		t.Fatalf("debug page: %v, %d sections:\n%s", err, len(page.Sections), rec.Body)
	}
	var st kafkagray.State
	if err := json.Unmarshal(page.Sections[0].Value, &st); err != nil {
		t.Fatal(err)
	}
	if st.Group != "billing" || st.Consumed["prod"]["failed"] != 1 || st.Consumed["gray"]["ok"] != 1 || st.Kind != graylb.Prod {
		t.Fatalf("state %+v", st)
	}
	if os.Getenv("GRAYLB_KAFKA_ADDR") != "" {
		// The only member: every partition of the topic, the last one gray.
		if fmt.Sprint(st.Assigned[topic]) != "[0 1 2 3]" || fmt.Sprint(st.TopicPartitions[topic].Gray) != "[3]" || st.LastRebalance == nil {
			t.Fatalf("assignment in the state: %+v", st)
		}
	}
	if md := link.Metadata(); md["kafka.group"] != "billing" || md["kafka.topics"] != topic || md["kafka.kind"] != "prod" {
		t.Fatalf("metadata %v", md)
	}
}

// registerConsumer registers a consuming instance with the Link's
// metadata, for graylb status. Run by TestKafkaSeenRegistration.
func registerConsumer(ctx context.Context, link *kafkagray.Link, host string, port int, gray bool, opts ...nacos.Option) (*nacos.Registration, error) {
	// snippet: kafka-seen-register
	reg, err := nacos.Register(ctx, nacos.Service{Name: "billing", Host: host, Port: port, Gray: &gray,
		Metadata: link.Metadata(), // kafka.group, kafka.topics, kafka.kind, kafka.grayPartitions
	}, opts...)
	// end snippet
	return reg, err
}

// The registration snippet against a real Nacos server: the instance's
// metadata carries the Link's keys.
func TestKafkaSeenRegistration(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped under -race: nacos-sdk-go races inside its RPC client; make test runs it without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	lb, err := graylb.New(graylb.NewRegistry(), graylb.WithSelfGray(true))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	link, err := kafkagray.New(lb, kafkagray.WithGroup("billing", "orders", "payments"))
	if err != nil {
		t.Fatal(err)
	}
	group := fmt.Sprintf("graylb-docs-seen-%d", time.Now().UnixNano())
	opts := []nacos.Option{nacos.WithServers(addr), nacos.WithGroup(group), nacos.WithCacheDir(t.TempDir()), nacos.WithLogDir(t.TempDir())}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := registerConsumer(ctx, link, "127.0.0.1", 9300, true, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	sup, err := nacos.NewSupplier(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	var md map[string]string
	deadline, _ := ctx.Deadline()
	poll(time.Until(deadline), 100*time.Millisecond, func() bool {
		if list, err := sup.Instances(ctx, "billing"); err == nil && len(list) == 1 {
			md = list[0].Metadata
			return true
		}
		return false
	})
	if md["kafka.group"] != "billing" || md["kafka.topics"] != "orders,payments" || md["kafka.kind"] != "gray" || md["gray"] != "true" {
		t.Fatalf("registered metadata %v", md)
	}
}
