package matrixtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A record hop of the matrix, without a broker: the calling service
// produces a record through kafkagray (Link.Stamp, then Link.Partitioner:
// the record's partition by its kind), and a consumer instance of the next
// service, chosen as kafkagray's group balancer assigns partitions (the
// topic's last partition, its gray one, to a gray consumer; the others to
// prod consumers only), admits it through kafkagray (Link.Context) and
// runs its handler with that context alone, as a consumer runs a record's
// handler, then answers the chain to the producer in memory. A service
// consumed so has a prod and a gray consumer and no lane one: a group's
// consumers are of a kind, not of a version.

// partitions is each record topic's partition count: the last is gray
// (kafkagray.WithGrayPartitions' default, 1).
const partitions = 4

// consumers are the record consumers serving, by the address they are
// registered under.
var consumers sync.Map // string → *consumer

type consumer struct {
	link *kafkagray.Link
	fn   handlerFunc
}

// serveRecords starts a consumer instance over lb (its records written
// outside the trust boundary when boundary is set) and returns the address
// it is registered under: a loopback listener's, held while the test runs
// so that no other instance gets it.
func serveRecords(t *testing.T, lb *graylb.LoadBalancer, boundary bool, fn handlerFunc) string {
	t.Helper()
	var opts []kafkagray.Option
	if boundary {
		opts = append(opts, kafkagray.Untrusted())
	}
	link, err := kafkagray.New(lb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	addr := l.Addr().String()
	consumers.Store(addr, &consumer{link: link, fn: fn})
	t.Cleanup(func() {
		consumers.Delete(addr)
		l.Close()
	})
	return addr
}

// dialRecords returns a producer of service's records over lb: a call
// produces a record with ctx, hands it to the consumer its partition is
// assigned to, and returns that consumer's answer.
func dialRecords(t *testing.T, lb *graylb.LoadBalancer, service string) caller {
	t.Helper()
	link, err := kafkagray.New(lb)
	if err != nil {
		t.Fatal(err)
	}
	part := link.Partitioner().ForTopic(service)
	var mu sync.Mutex // the topic partitioner's turns
	return func(ctx context.Context, hdr map[string]string) (string, error) {
		noHeaders(hdr)
		rec := &kgo.Record{Topic: service, Value: []byte("call")}
		link.Stamp(ctx, rec)
		mu.Lock()
		p := part.Partition(rec, partitions)
		mu.Unlock()
		c, err := assigned(service, p)
		if err != nil {
			return "", err
		}
		// What a broker delivers: the record's headers, copied.
		got := &kgo.Record{Topic: rec.Topic, Partition: int32(p), Value: rec.Value, Headers: append([]kgo.RecordHeader(nil), rec.Headers...)}
		hctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		return c.fn(c.link.Context(hctx, got))
	}
}

// assigned returns the consumer of service that partition p is assigned
// to: the gray partition to a gray consumer (the matrix's rules are never
// closed), the others to prod consumers, in turn by partition.
func assigned(service string, p int) (*consumer, error) {
	insts, err := reg.Instances(context.Background(), service)
	if err != nil {
		return nil, err
	}
	gray := p == partitions-1
	var group []*consumer
	for _, in := range insts {
		if graylb.IsGray(in.Metadata["gray"]) != gray {
			continue
		}
		if c, ok := consumers.Load(in.Addr()); ok {
			group = append(group, c.(*consumer))
		}
	}
	if len(group) == 0 {
		return nil, fmt.Errorf("no consumer of %s for partition %d", service, p)
	}
	return group[p%len(group)], nil
}
