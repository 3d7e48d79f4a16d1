package graylbkratos_test

import (
	"context"
	"testing"

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
