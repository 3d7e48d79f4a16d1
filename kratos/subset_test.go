package graylbkratos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2/selector"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
)

// seenBuilder is graylb's Builder that records, for each Selector, whether
// a node list Kratos applied to it held a gray node.
type seenBuilder struct {
	*graylbkratos.Builder
	mu   sync.Mutex
	gray map[*seenSelector]bool
}

type seenSelector struct {
	selector.Selector
	b *seenBuilder
}

func (b *seenBuilder) Build() selector.Selector {
	s := &seenSelector{Selector: b.Builder.Build(), b: b}
	b.mu.Lock()
	b.gray[s] = false
	b.mu.Unlock()
	return s
}

func (s *seenSelector) Apply(nodes []selector.Node) {
	for _, n := range nodes {
		if isGrayNode(n) {
			s.b.mu.Lock()
			s.b.gray[s] = true
			s.b.mu.Unlock()
		}
	}
	s.Selector.Apply(nodes)
}

// TestKratosSubset: Kratos' clients hand their selector a subset of a
// service's instances (25 by default, each client its own): with more
// instances than that, a client whose subset holds no gray instance sends
// its gray calls to prod. WithSubset(0), as docs/kratos.md's client lines
// set it, hands every instance to graylb's Selector.
func TestKratosSubset(t *testing.T) {
	reg := graylb.NewRegistry()
	for i := 0; i < 60; i++ {
		if err := reg.Register(graylb.NewInstance("big.http", "10.0.0.1", 1000+i, map[string]string{"kind": "http"})); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Register(graylb.NewInstance("big.http", "10.0.0.2", 1000, map[string]string{"kind": "http", "gray": "true"})); err != nil {
		t.Fatal(err)
	}
	lb := newLB(t, reg, graylb.Rules{})
	prev := selector.GlobalSelector()
	defer selector.SetGlobalSelector(prev)
	d := graylbkratos.NewDiscovery(reg)
	// missed returns how many of n clients made with opts never had the
	// gray instance.
	missed := func(n int, opts ...khttp.ClientOption) int {
		b := &seenBuilder{Builder: graylbkratos.NewBuilder(lb), gray: map[*seenSelector]bool{}}
		defer b.Close()
		selector.SetGlobalSelector(b)
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c, err := khttp.NewClient(ctx, append([]khttp.ClientOption{khttp.WithEndpoint("discovery:///big.http"),
				khttp.WithDiscovery(d), khttp.WithBlock()}, opts...)...)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		m := 0
		for _, g := range b.gray {
			if !g {
				m++
			}
		}
		return m
	}
	// Kratos' default: each client's 25 of 61 holds the gray instance with
	// probability 25/61; that all of 20 clients do is a chance of 2e-8.
	if m := missed(20); m == 0 {
		t.Fatal("every client with Kratos' default subset had the gray instance")
	}
	if m := missed(20, khttp.WithSubset(0)); m != 0 {
		t.Fatalf("%d of 20 clients with WithSubset(0) never had the gray instance", m)
	}
}
