package kafkagray

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Follow makes cl's group rebalance each time the rules open or close
// (closed: true, the rollback lever, and back), until stop is called:
// cl rejoins announcing its rules, and the group's leader assigns the gray
// partitions again (to prod members while closed). Every member of the
// group should follow its rules; one member's closed rules are enough to
// close the group. A client that consumes no group is left alone. Handle
// and HandleErr produce the records of the other kind that reach this
// consumer again with cl (built with ClientOpts, for the partitioner): a
// Link whose client is not given here handles them itself, and logs it.
func (l *Link) Follow(cl *kgo.Client) (stop func()) {
	if cl == nil {
		return func() {}
	}
	l.cl.Store(cl)
	var mu sync.Mutex
	last := l.closed()
	return l.b.OnRulesChange(func() {
		now := l.closed()
		mu.Lock()
		changed := now != last
		last = now
		mu.Unlock()
		if changed {
			// ForceRebalance takes the group's lock: not on the rules'
			// goroutine, which must not block.
			go cl.ForceRebalance()
		}
	})
}
