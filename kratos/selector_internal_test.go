package graylbkratos

import (
	"context"
	"strconv"
	"testing"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
)

// TestFilteredRoundRobinWraps: the round robin among what a NodeFilter
// leaves stays in range once its counter passes 2^31 (where an int of 32
// bits is negative: GOARCH=386, arm).
func TestFilteredRoundRobinWraps(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	b := NewBuilder(lb)
	defer b.Close()
	s := b.Build().(*Selector)
	var nodes []selector.Node
	for i := 0; i < 3; i++ {
		nodes = append(nodes, selector.NewNode("grpc", "127.0.0.1:"+strconv.Itoa(9000+i), &registry.ServiceInstance{Name: "svc"}))
	}
	s.Apply(nodes)
	all := selector.WithNodeFilter(func(_ context.Context, n []selector.Node) []selector.Node { return n })
	for _, start := range []uint32{1<<31 - 1, 1 << 31, 1<<32 - 2} {
		s.rr.Store(start)
		for i := 0; i < 4; i++ {
			if n, _, err := s.Select(context.Background(), all); err != nil || n == nil {
				t.Fatalf("counter at %d+%d: %v, %v", start, i, n, err)
			}
		}
	}
}
