package main

import (
	"net/http"
	"strings"
	"testing"
)

// The demo mirrors every order read to the gray build, sees its bug (one
// order in four), returns only prod's answers and refuses every write of a
// copy: the ledger gets one POST per user read.
func TestDemo(t *testing.T) {
	var out strings.Builder
	if err := run(&out, nil); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"users: 20 orders read through the edge, every answer prod's (0 with a wrong total)",
		"mirrored: 20 GETs copied to the gray build of orders;",
		"differing (by body 5, status 0, latency ", // a stall of this machine can make a copy slower than 3 × its primary + 50 ms
		"0 failed; learned as noise (they differ between two prod answers): requestId, servedAt",
		"(POST ledger/views: 20 on the gray build,",
		"ledger: 20 POSTs received (20 users' reads), 0 of them from a copy",
		"by body at total",
		"ok: no write of a copy got through",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}

// A build whose writes bypass graylb (a client of its own, to the ledger's
// address) writes for its copies: the demo says so and fails.
func TestDemoFailsWhenACopyWrites(t *testing.T) {
	leaky := func(ledgerAddr string) *http.Client {
		return &http.Client{Transport: rewrite{to: ledgerAddr}}
	}
	var out strings.Builder
	err := run(&out, leaky)
	if err == nil || !strings.Contains(err.Error(), "a copy's write got through: the ledger received") {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
}

// rewrite sends every request to one address, past graylb.
type rewrite struct{ to string }

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Host = r.to
	return http.DefaultTransport.RoundTrip(req)
}
