package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestOnce runs the example's one-shot mode: free ports, one request of
// each kind through the gateway, each answered by the right instance.
func TestOnce(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), config{once: true, register: true}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		`gray header ""      -> user-service gray=false`,
		`gray header "true"  -> user-service gray=true`,
		`gray header "false" -> user-service gray=false`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}

// TestLongLived starts the servers as the default mode does (here on free
// ports), prints the commands, and stops when the context ends.
func TestLongLived(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out syncBuffer
	go func() {
		done <- run(ctx, config{gateway: "127.0.0.1:0", prod: "127.0.0.1:0", gray: "127.0.0.1:0", register: true}, &out)
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "Ctrl-C stops") })
	if !strings.Contains(out.String(), "curl -H 'gray: true' http://127.0.0.1:") {
		t.Errorf("no curl command in:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
