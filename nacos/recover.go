package nacos

import (
	"context"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
)

// The Supplier's catch-up after an outage. While the SDK's connection is
// down the server pushes nothing, and after a long outage the SDK
// reconnects seconds after the server is back (its back-off grows to 5 s
// and nothing wakes it). So while the naming client reports the
// connection down, the Supplier reads each subscribed service's list
// over the server's HTTP open API every recoverEvery: while the server
// cannot be reached the first read fails and ends the round (one request
// a period); once it answers, every list that changed meanwhile is handed
// over within a period, and again every period until the SDK is
// connected and pushes again.
//
// Measured (faulttest's TestFault_NacosAfterBackOff, the link down 40 s
// and back right after one of the SDK's attempts): the change made during
// the outage routed about 3 s after the link was back without it, well
// under a second with it.
//
// A list read this way goes through the same path as a reconciliation:
// it is handed over only when it differs from the last one and no other
// list was handed over since the read began (a push that arrived
// meanwhile is newer and wins), and the watchers (a graylb.Cache) apply
// their rules to it as to a push: an empty list, or one that lost a whole
// kind within the refill window (the outage opened one), is held.
//
// A server that answers over HTTP while the SDK stays disconnected for
// longer than recoverPatience (the SDK retries at least every 5 s, so it
// would have reconnected) is not coming back through the SDK: its gRPC
// port (the HTTP port + 1000) is likely unreachable from here. The
// Supplier then says so once, as a warning, and reads every recoverSlow
// (the reconciliation's period) instead of every recoverEvery, so that a
// fleet of clients does not poll the server four times a second each for
// as long as the misconfiguration lasts. The pace comes back once the
// connection has been up.
//
// While connected this costs one look at the connection's state a period.
// Another naming client than a Client (WithNamingClient) has no such
// read: the loop does not run.

// recoverEvery is how often the Supplier looks at the connection and,
// while it is down, reads the lists over HTTP.
const recoverEvery = 250 * time.Millisecond

// recoverPatience is how long the catch-up keeps its pace while the
// server answers over HTTP and the SDK's connection stays down.
const recoverPatience = 15 * time.Second

// recoverTimeout bounds one read over HTTP: a server that accepts the
// connection but does not answer (stopped, overloaded) costs at most this
// per period.
const recoverTimeout = time.Second

// httpListing is what a naming client offers for the catch-up: a read of
// a service's list that does not go through the SDK's connection.
type httpListing interface {
	listOverHTTP(ctx context.Context, service, group string, clusters []string) ([]model.Instance, error)
}

// recoverLoop reads the subscribed lists over HTTP while the naming
// client is disconnected, every period, until Close.
func (s *Supplier) recoverLoop(l httpListing, every, patience, slow time.Duration) {
	defer s.done.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var answering, last time.Time // since when the server answers over HTTP; the last read
	warned := false
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		if s.client.healthy() {
			answering, warned = time.Time{}, false
			continue
		}
		now := time.Now()
		if !answering.IsZero() && now.Sub(answering) > patience {
			if !warned {
				warned = true
				s.logger.Warn("nacos: the server answers over HTTP but the SDK's connection stays down; is its gRPC port (the HTTP port + 1000) reachable? Reading the lists over HTTP every "+slow.String()+" meanwhile",
					"down for at least", patience)
			}
			if now.Sub(last) < slow {
				continue
			}
		}
		last = now
		if s.refresh(l.listOverHTTP, recoverTimeout, true, "nacos: read a list over HTTP while the connection is down; it differed from the last one") {
			if answering.IsZero() {
				answering = now
			}
		} else {
			answering = time.Time{}
		}
	}
}
