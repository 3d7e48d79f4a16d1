package adapter

import (
	"context"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
)

// What a registration of the process (package nacos, a framework's
// registrar) takes from its LoadBalancer, so that the process's keys, kind
// and callers are said in one place.

// SelfGray reports the LoadBalancer's own gray flag (graylb.WithSelfGray):
// the process's kind, which its registration and its Kafka consumers take
// from here. A nil Balancer is prod.
func (b *Balancer) SelfGray() bool { return b != nil && b.e().SelfGray() }

// Quiet returns once no incoming call has been admitted by any server side
// of the LoadBalancer (Admitter.Admit; a record from a queue, Admission.Queued,
// does not count) for d (seen within a tenth of d, at most 250 ms), or when
// ctx ends, with ctx.Err(). last is when it
// last saw a call arrive, zero when none arrived after it began. A
// graceful stop waits on it after the instance left the registry: callers
// that cache instance lists (Spring Cloud LoadBalancer keeps one 35 s by
// default) keep calling until their cache expires, whatever the registry
// says. An admission costs two atomic loads while nothing waits.
func (b *Balancer) Quiet(ctx context.Context, d time.Duration) (last time.Time, err error) {
	return b.e().Quiet(ctx, d)
}

// Live returns the LoadBalancers of this process that graylb.New made and
// Close has not closed, oldest first: a registration checks against them
// that it writes the metadata keys they read.
func Live() []*graylb.LoadBalancer {
	all := engine.Live()
	out := make([]*graylb.LoadBalancer, len(all))
	for i, x := range all {
		out[i] = (*graylb.LoadBalancer)(x)
	}
	return out
}
