package faulttest

import (
	"os"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/stretchr/testify/require"
)

// A fault is one of the plan's: a toxic on the link's proxies (on the
// streams it names) or, with down, the proxies disabled (every connection
// closed, new ones refused) for its duration.
type fault struct {
	name    string
	what    string // for the table
	toxic   string // Toxiproxy's toxic type; "" with down
	attrs   toxiproxy.Attributes
	streams []string // "upstream" (client to server), "downstream" (server to client)
	down    bool
	dur     time.Duration
}

// plan is the faults a run applies to each link, in order. The short plan
// (the default, `make test`) holds each fault 4 s and the link down 5 s,
// longer than a request's deadline (requestTimeout) so that a request
// the fault holds can run out of time; GRAYLB_FAULT_PLAN=long
// (`make test-reliability`) 20 s and 60 s.
func plan() []fault {
	each, down := 4*time.Second, 5*time.Second
	if long() {
		each, down = 20*time.Second, 60*time.Second
	}
	both := []string{"upstream", "downstream"}
	answers := []string{"downstream"}
	return []fault{
		{name: "latency", what: "latency 2 s (answers)", toxic: "latency", attrs: toxiproxy.Attributes{"latency": 2000}, streams: answers, dur: each},
		{name: "blackhole", what: "black hole (`timeout` 0, both ways)", toxic: "timeout", attrs: toxiproxy.Attributes{"timeout": 0}, streams: both, dur: each},
		{name: "reset", what: "`reset_peer` 0 (both ways)", toxic: "reset_peer", attrs: toxiproxy.Attributes{"timeout": 0}, streams: both, dur: each},
		{name: "bandwidth", what: "bandwidth 1 KB/s (answers)", toxic: "bandwidth", attrs: toxiproxy.Attributes{"rate": 1}, streams: answers, dur: each},
		{name: "slicer", what: "`slicer` 16±8 B, 1 ms apart (answers)", toxic: "slicer", attrs: toxiproxy.Attributes{"average_size": 16, "size_variation": 8, "delay": 1000}, streams: answers, dur: each},
		{name: "down", what: "link down", down: true, dur: down},
	}
}

// long reports whether the long plan runs (GRAYLB_FAULT_PLAN=long).
func long() bool { return os.Getenv("GRAYLB_FAULT_PLAN") == "long" }

// start applies f to the link's proxies; the function it returns ends
// the fault, and the end of the test does if it has not.
func (f fault) start(t *testing.T, link []*toxiproxy.Proxy) (end func()) {
	t.Helper()
	var once sync.Once
	end = func() { once.Do(func() { f.end(t, link) }) }
	t.Cleanup(end)
	for _, p := range link {
		if f.down {
			require.NoError(t, p.Disable(), "disabling proxy %s", p.Name)
			continue
		}
		for _, s := range f.streams {
			_, err := p.AddToxic(f.name+"_"+s, f.toxic, s, 1, f.attrs)
			require.NoError(t, err, "adding toxic %s to proxy %s", f.name, p.Name)
		}
	}
	return end
}

// end ends f on the link's proxies.
func (f fault) end(t *testing.T, link []*toxiproxy.Proxy) {
	t.Helper()
	for _, p := range link {
		if f.down {
			require.NoError(t, p.Enable(), "enabling proxy %s", p.Name)
			continue
		}
		for _, s := range f.streams {
			require.NoError(t, p.RemoveToxic(f.name+"_"+s), "removing toxic %s from proxy %s", f.name, p.Name)
		}
	}
}
