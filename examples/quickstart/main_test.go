package main

import (
	"net/http"
	"testing"

	"github.com/graylb/graylb"
)

// TestQuickstart runs a few scenarios of the demo and its invariant check,
// including a deliberate violation to show the check can fail.
func TestQuickstart(t *testing.T) {
	w, err := newWorld()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.scenario("gray: true", 3, header("true"))
	w.scenario("no header", 3, func(int) (http.Header, string) { return nil, "" })
	w.setRules(graylb.Rules{CanaryPercent: 20})
	w.canary(20)
	if !w.summary() {
		t.Fatal("invariants failed")
	}
	// A forged record of a prod request served by a gray instance.
	w.log = append(w.log, record{scenario: "forged", kind: graylb.Prod, hops: []*instance{w.instances["user-gray"]}})
	if w.summary() {
		t.Fatal("the invariant check passed a prod request on a gray instance")
	}
}
