package interoptest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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

// kafkaAddr returns the broker (GRAYLB_KAFKA_ADDR) or skips.
func kafkaAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("GRAYLB_KAFKA_ADDR")
	if addr == "" {
		t.Skip("GRAYLB_KAFKA_ADDR is not set (scripts/kafka.sh start; make test sets it)")
	}
	return addr
}

// createTopic creates topic with 4 partitions (the last one gray).
func createTopic(t *testing.T, addr, topic string) {
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
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// goConsumer is a kafkagray consumer of a kind, counting what it handled.
type goConsumer struct {
	link *kafkagray.Link
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func startGoConsumer(t *testing.T, addr, topic, group string, gray bool, handled func(id string, grayRecord, grayConsumer bool)) *goConsumer {
	t.Helper()
	lb, err := graylb.New(graylb.NewRegistry(), graylb.WithSelfGray(gray))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	link, err := kafkagray.New(lb)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(link.ClientOpts(), kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &goConsumer{link: link, cl: cl, stop: cancel, done: make(chan struct{})}
	unfollow := link.Follow(cl)
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 100)
			link.Handle(context.Background(), fs, func(_ context.Context, r *kgo.Record) {
				handled(string(r.Value), recordGray(r), gray)
			})
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = cl.CommitUncommittedOffsets(cctx)
			ccancel()
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(func() { cancel(); <-c.done; unfollow(); cl.Close() })
	return c
}

func recordGray(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, "gray") {
			return strings.EqualFold(string(h.Value), "true")
		}
	}
	return false
}

// TestJavaKafka: records of a Spring Kafka producer (its own partitioner,
// the gray header copied from the request) reach graylb consumers of
// their kind; records graylb produces from a request that said
// gray: TRUE reach a Spring Kafka consumer with gray: true, the value a
// Java reader compares with.
func TestJavaKafka(t *testing.T) {
	addr := kafkaAddr(t)
	_, appsJar := jars(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	toGo, toJava := "interop-to-go-"+suffix, "interop-to-java-"+suffix
	createTopic(t, addr, toGo)
	createTopic(t, addr, toJava)

	// The collector of what the Spring consumer received.
	var mu sync.Mutex
	javaGot := map[string]string{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f := strings.SplitN(string(b), "|", 3)
		if len(f) >= 2 {
			mu.Lock()
			javaGot[f[0]] = f[1]
			mu.Unlock()
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	java := startJava(t, appsJar, "jkafka", "--spring.profiles.active=kafka", "--KAFKA_ADDR="+addr,
		"--spring.cloud.nacos.discovery.enabled=false", "--spring.cloud.service-registry.auto-registration.enabled=false",
		"--interop.kafka.consume=true", "--interop.kafka.topic="+toJava, "--interop.kafka.group=jkafka-"+suffix,
		"--interop.kafka.report=http://"+l.Addr().String()+"/report")

	// Two graylb consumers of one group, prod and gray.
	type rec struct{ grayRecord, grayConsumer bool }
	handled := map[string][]rec{}
	note := func(id string, grayRecord, grayConsumer bool) {
		mu.Lock()
		handled[id] = append(handled[id], rec{grayRecord, grayConsumer})
		mu.Unlock()
	}
	group := "interop-go-" + suffix
	p := startGoConsumer(t, addr, toGo, group, false, note)
	g := startGoConsumer(t, addr, toGo, group, true, note)
	if !until(60*time.Second, 100*time.Millisecond, func() bool {
		sp, sg := p.link.State(), g.link.State()
		return len(sp.Assigned[toGo]) == 3 && len(sg.Assigned[toGo]) == 1 && sg.TopicPartitions[toGo].GrayConsumers
	}) {
		t.Fatalf("the group did not settle: prod %+v, gray %+v", p.link.State().Assigned, g.link.State().Assigned)
	}
	java.ready(t, false)

	// The Spring producer: 60 gray records (the request's gray header
	// copied onto each), 60 prod records.
	const n = 60
	for _, kind := range []string{"gray", "prod"} {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/produce?topic=%s&n=%d&id=%s", java.url(), toGo, n, kind), nil)
		if kind == "gray" {
			req.Header.Set("gray", "true")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("produce: %d %s", resp.StatusCode, b)
		}
	}
	all := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 2*n
	}
	if !until(60*time.Second, 100*time.Millisecond, all) {
		t.Errorf("%d of %d records handled within 60 s", len(handled), 2*n)
	}
	prodOnGray, grayOnProd, lost := 0, 0, 0
	mu.Lock()
	for _, kind := range []string{"gray", "prod"} {
		for i := range n {
			rs := handled[fmt.Sprintf("%s-%d", kind, i)]
			if len(rs) == 0 {
				lost++
			}
			for _, r := range rs {
				if r.grayConsumer && !r.grayRecord {
					prodOnGray++
				}
				if !r.grayConsumer && r.grayRecord {
					grayOnProd++
				}
			}
		}
	}
	mu.Unlock()
	rerouted := p.link.State().Rerouted + g.link.State().Rerouted

	// graylb produces from requests: gray: TRUE as the request said it,
	// and requests that said nothing.
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	link, err := kafkagray.New(lb)
	if err != nil {
		t.Fatal(err)
	}
	pcl, err := kgo.NewClient(append(link.ClientOpts(), kgo.SeedBrokers(addr))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	grayCtx := link.Context(context.Background(), &kgo.Record{Headers: []kgo.RecordHeader{{Key: "gray", Value: []byte("TRUE")}}})
	for i := range n {
		for _, kind := range []string{"gray", "prod"} {
			ctx := context.Background()
			if kind == "gray" {
				ctx = grayCtx
			}
			if err := link.ProduceSync(ctx, pcl, &kgo.Record{Topic: toJava, Value: []byte(fmt.Sprintf("%s-%d", kind, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !until(90*time.Second, 100*time.Millisecond, func() bool { mu.Lock(); defer mu.Unlock(); return len(javaGot) == 2*n }) {
		t.Errorf("the Spring consumer reported %d of %d records within 90 s", len(javaGot), 2*n)
	}
	notCanonical := 0
	mu.Lock()
	for id, h := range javaGot {
		if (strings.HasPrefix(id, "gray-") && h != "true") || (strings.HasPrefix(id, "prod-") && h != "" && h != "false") {
			notCanonical++
		}
	}
	javaCount := len(javaGot)
	mu.Unlock()
	reliabilityOut(t, "kafka",
		fmt.Sprintf("| Spring Kafka producer (its partitioner; the gray header copied from the request) → graylb consumers, prod and gray | %d | %d | %d | %d | %d rerouted |",
			2*n, lost, prodOnGray, grayOnProd, rerouted),
		fmt.Sprintf("| graylb producer (requests with `gray: TRUE` and without) → Spring Kafka consumer | %d | %d | %d records whose header was not `true` (gray) or absent (prod) | | |",
			2*n, 2*n-javaCount, notCanonical))
	if lost != 0 || prodOnGray != 0 || grayOnProd != 0 || notCanonical != 0 {
		t.Errorf("Spring producer: %d lost, %d prod records on the gray consumer, %d gray records on prod; graylb producer: %d not canonical",
			lost, prodOnGray, grayOnProd, notCanonical)
	}
}
