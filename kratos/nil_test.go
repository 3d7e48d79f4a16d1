package graylbkratos_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-kratos/kratos/v2/selector"

	graylbkratos "github.com/graylb/graylb/kratos"
)

// TestNilLoadBalancer: a service that calls nobody may use the middleware
// without a LoadBalancer: the default key names, nothing decided.
func TestNilLoadBalancer(t *testing.T) {
	s := startServer(t, "http", func(ctx context.Context) (string, error) { return "ok", nil }, graylbkratos.Server(nil))
	c := &chain{scheme: "http", edge: s.endpoint}
	if got, err := c.call(map[string]string{"gray": "true"}); err != nil || got != "ok" {
		t.Fatalf("Server(nil): %q, %v", got, err)
	}
	h := graylbkratos.Client(nil)(func(ctx context.Context, req interface{}) (interface{}, error) { return "ok", nil })
	if out, err := h(callCtx(header{}), nil); err != nil || out != "ok" {
		t.Fatalf("Client(nil): %v, %v", out, err)
	}
}

// TestNilLoadBalancerBuilder: a Builder over a nil LoadBalancer (graylb.New
// failed and its error was dropped) does not panic, at construction or
// when Kratos applies nodes: every Select fails, saying why, as httpctx's
// Transport and grpcctx's resolver do without a LoadBalancer.
func TestNilLoadBalancerBuilder(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	b := graylbkratos.NewBuilder(nil)
	defer b.Close()
	s := b.Build()
	s.Apply(nodes("svc", false, true))
	_, _, err := s.Select(callCtx(header{}))
	if !errors.Is(err, selector.ErrNoAvailable) || !strings.Contains(err.Error(), "LoadBalancer") {
		t.Fatalf("Select: %v, want ErrNoAvailable naming the missing LoadBalancer", err)
	}
}
