package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// arrivals says whether a call was admitted since a watcher last looked,
// for a graceful stop that waits until callers stop coming (Quiet). A
// server side's admission costs two atomic loads while nobody watches: a
// store on every admission would make every core write one cache line per
// request. A watcher bumps epoch each time it looks; the first admission
// after that stores the new epoch in seen.
type arrivals struct {
	epoch atomic.Uint64
	seen  atomic.Uint64
}

// Admitted records that a server side admitted an incoming call.
func (lb *LoadBalancer) Admitted() {
	a := &lb.arrivals
	e := a.epoch.Load()
	if a.seen.Load() >= e {
		return
	}
	for {
		s := a.seen.Load()
		if s >= e || a.seen.CompareAndSwap(s, e) {
			return
		}
	}
}

// quietPoll is how often Quiet looks for a call admitted since it last
// looked: a tenth of the quiet period, within these bounds.
const (
	minQuietPoll = 10 * time.Millisecond
	maxQuietPoll = 250 * time.Millisecond
)

// Quiet is adapter.Balancer.Quiet.
func (lb *LoadBalancer) Quiet(ctx context.Context, d time.Duration) (last time.Time, err error) {
	poll := min(max(d/10, minQuietPoll), maxQuietPoll)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	mark := lb.arrivals.epoch.Add(1)
	since := time.Now()
	for {
		if time.Since(since) >= d {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-tick.C:
		}
		if lb.arrivals.seen.Load() >= mark {
			last = time.Now()
			since = last
		}
		mark = lb.arrivals.epoch.Add(1)
	}
}

// GrayMetadataKey is the instance metadata key of the gray flag.
func (lb *LoadBalancer) GrayMetadataKey() string { return lb.gray.metaKey }

// SelfGray is the calling service's own gray flag (WithSelfGray).
func (lb *LoadBalancer) SelfGray() bool { return lb.gray.selfGray }

// live are the LoadBalancers New made that are not closed, by the order
// they were made in.
var live struct {
	mu   sync.Mutex
	next uint64
	m    map[*LoadBalancer]uint64
}

func addLive(lb *LoadBalancer) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.m == nil {
		live.m = map[*LoadBalancer]uint64{}
	}
	live.next++
	live.m[lb] = live.next
}

func removeLive(lb *LoadBalancer) {
	live.mu.Lock()
	defer live.mu.Unlock()
	delete(live.m, lb)
}

// Live returns the LoadBalancers of the process that New made and Close
// has not closed, oldest first.
func Live() []*LoadBalancer {
	live.mu.Lock()
	defer live.mu.Unlock()
	out := make([]*LoadBalancer, 0, len(live.m))
	for lb := range live.m {
		out = append(out, lb)
	}
	for i := 1; i < len(out); i++ { // few: insertion sort by age
		for j := i; j > 0 && live.m[out[j]] < live.m[out[j-1]]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
