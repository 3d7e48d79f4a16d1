package main

import (
	"bytes"
	"context"
	"testing"
)

// TestOnce runs the one-shot mode: every kind of request decides both hops.
func TestOnce(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), config{once: true}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}
