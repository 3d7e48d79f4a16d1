// A user's program on kafkagray (no broker here): a record produced while
// a gray request is served carries gray=true and goes to the gray
// partition; its consumer's context routes gray.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	reg := graylb.NewRegistry()
	_ = reg.Register(graylb.NewInstance("svc", "10.0.0.1", 80, nil))
	_ = reg.Register(graylb.NewInstance("svc", "10.0.0.2", 80, map[string]string{"gray": "true"}))
	lb, err := graylb.New(reg)
	if err != nil {
		fail(err)
	}
	defer lb.Close()
	link, err := kafkagray.New(lb)
	if err != nil {
		fail(err)
	}
	in := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "gray", Value: []byte("true")}}}
	ctx := link.Context(context.Background(), in) // as a consumer's handler gets it
	out := &kgo.Record{Topic: "orders"}
	link.Stamp(ctx, out)
	if p := link.Partitioner().ForTopic("orders").Partition(out, 4); p != 3 {
		fail(fmt.Errorf("gray record on partition %d of 4, want 3", p))
	}
	inst, err := lb.Pick(ctx, "svc")
	if err != nil || inst.Host != "10.0.0.2" {
		fail(fmt.Errorf("picked %v, %v: want the gray instance", inst.Host, err))
	}
	fmt.Println("kafkagray: a gray record's next hop is gray, on the gray partition")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
