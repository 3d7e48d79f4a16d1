package redisrules

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifyConfig is the server setting that chooses the keyspace events
// published.
const notifyConfig = "notify-keyspace-events"

// healthInterval is how long a subscription may stay silent before it is
// pinged; a ping unanswered for as long again counts as a broken
// subscription.
const healthInterval = 15 * time.Second

// Modes of following changes, as logged.
const (
	modeNotifications = "notifications"
	modePolling       = "polling"
)

// notifier is one watcher's keyspace-notification subscriptions.
//
// A single server or a Sentinel's master has one. On a Cluster every master
// that publishes keyspace events has one: keyspace notifications are
// published only by the node that executes the write, which is the master
// of the keys' slot, or, while the slot migrates, the node importing it
// (writes redirected by ASK). Listening to every master, the notifications
// follow the keys through a migration at once, with no window in which the
// watcher still listens to the old master only. The subscriptions follow
// the masters: setup, run again when one breaks (a master died or failed
// over), when the client's slot map names another master for the keys, and
// when a poll finds a change no notification announced, subscribes to new
// masters and drops those that left.
//
// The mode logged is that of the keys' node (the master of their slot): it
// follows notifications when that node is subscribed, polling otherwise.
type notifier struct {
	s      *RuleSource
	subs   map[string]*nodeSub // by node address
	wake   chan struct{}       // a notification came: read the keys
	gone   chan struct{}       // a key was deleted (or migrated away: MIGRATE deletes it on its source)
	broken chan struct{}       // a subscription ended: set up again
	mode   string              // how changes are followed, as last logged
	node   string              // the keys' node, as last logged
	logged string              // what the last mode line said, to log changes only
	// unsettled: the last setup found the slot map out of date (the
	// master it names for the keys redirects them): read it again soon.
	unsettled bool
}

func newNotifier(s *RuleSource) *notifier {
	return &notifier{s: s, subs: map[string]*nodeSub{}, wake: make(chan struct{}, 1), gone: make(chan struct{}, 1), broken: make(chan struct{}, 1)}
}

// nodeSub is the subscription on one node and the goroutine that receives
// from it.
type nodeSub struct {
	ps   *redis.PubSub
	stop chan struct{} // closed before ps is closed here
	done chan struct{} // closed when the goroutine ends
}

// alive reports whether the subscription still receives.
func (sub *nodeSub) alive() bool {
	select {
	case <-sub.done:
		return false
	default:
		return true
	}
}

// following reports whether changes are followed by notifications.
func (n *notifier) following() bool { return n.mode == modeNotifications }

// close ends every subscription.
func (n *notifier) close() {
	for addr := range n.subs {
		n.drop(addr)
	}
}

// drop ends the subscription on addr and waits for its goroutine.
func (n *notifier) drop(addr string) {
	sub, ok := n.subs[addr]
	if !ok {
		return
	}
	delete(n.subs, addr)
	close(sub.stop)
	_ = sub.ps.Close()
	<-sub.done
}

// signal sends on a channel of one slot without waiting: a pending signal
// stands for any number.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// receive passes the notifications of sub on as wake signals until the
// subscription ends, then signals broken, unless drop ended it.
func (n *notifier) receive(sub *nodeSub) {
	defer close(sub.done)
	pinged := false
	for {
		msg, err := sub.ps.ReceiveTimeout(context.Background(), healthInterval)
		var ne net.Error
		switch {
		case err == nil:
			pinged = false
		case errors.As(err, &ne) && ne.Timeout() && !pinged:
			// Silent for a while: a ping's answer shows the connection lives.
			pinged = true
			if sub.ps.Ping(context.Background()) == nil {
				continue
			}
			fallthrough
		default:
			// The connection failed (go-redis may have reconnected and
			// subscribed again, possibly to another node: a Sentinel's new
			// master), or the ping went unanswered: what was published
			// meanwhile is lost, and the node may no longer be a master.
			select {
			case <-sub.stop:
			default:
				signal(n.broken)
			}
			return
		}
		if m, ok := msg.(*redis.Message); ok {
			if m.Payload == "del" {
				signal(n.gone)
			}
			signal(n.wake)
		}
	}
}

// setup subscribes to the keys' keyspace notifications on the nodes that
// publish them, drops subscriptions on nodes that no longer do or are no
// longer masters, and logs how changes are followed when that changes. It
// reports false when a node could not be asked or subscribed to, or when
// the master the slot map names for the keys redirects them (unsettled:
// the map is out of date, and nothing is dropped or logged): setup is then
// due again.
func (n *notifier) setup(ctx context.Context) bool {
	s := n.s
	n.unsettled = false
	cc, cluster := s.client.(*redis.ClusterClient)
	if s.cfg.notify == NotifyOff {
		n.close()
		n.report(modePolling, "", "keyspace notifications off by option")
		return true
	}
	if cluster && !s.transactional {
		n.close()
		n.report(modePolling, "", "keys in different hash slots: no one node publishes their notifications")
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()

	// Each node's part runs in parallel: one node that does not answer
	// costs the others nothing.
	var mu sync.Mutex
	results := map[string]nodeResult{}
	visit := func(ctx context.Context, addr string, c nodeClient) {
		sub, have := n.subs[addr] // read only while setup runs
		r := n.prepare(ctx, addr, c, have && sub.alive())
		mu.Lock()
		results[addr] = r
		mu.Unlock()
	}
	var owner string
	if cluster {
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			visit(ctx, c.Options().Addr, c)
			return nil
		}); err != nil {
			n.report(modePolling, n.node, "cannot list the cluster's masters: "+err.Error())
			return false
		}
		m, err := cc.MasterForKey(ctx, s.cfg.layout.keys()[0])
		if err != nil {
			n.report(modePolling, n.node, "cannot find the master of the keys' slot: "+err.Error())
			return false
		}
		owner = m.Options().Addr
		// The slot map came from one node, which may not have learnt yet
		// that the keys' slot moved (a migration ends node by node): the
		// master it names must serve the slot itself. Until one does, no
		// subscription is dropped (the one on the new master may be
		// among them) and setup is due again.
		if !n.serves(ctx, m) {
			n.unsettled = true
		}
	} else {
		owner = serverName(ctx, s.client)
		visit(ctx, owner, s.client)
	}

	complete := true
	for addr := range n.subs {
		if _, ok := results[addr]; !ok && !n.unsettled {
			n.drop(addr) // no longer a master
		}
	}
	var subscribed []string
	for addr, r := range results {
		complete = complete && !r.failed
		if r.sub != nil {
			n.drop(addr)
			n.subs[addr] = r.sub
			go n.receive(r.sub)
			// A change made after the last read and before this
			// subscription was published to no one: read again.
			signal(n.wake)
		} else if r.why != "" {
			n.drop(addr)
		}
		if _, ok := n.subs[addr]; ok {
			subscribed = append(subscribed, addr)
		}
	}
	if n.unsettled {
		return false
	}
	slices.Sort(subscribed)
	if !cluster {
		subscribed = nil // the node says it all
	}
	r, ok := results[owner]
	switch {
	case !ok:
		n.report(modePolling, owner, "the master of the keys' slot was not among the masters listed")
		return false
	case r.why != "":
		n.report(modePolling, owner, r.why, subscribed...)
	default:
		n.report(modeNotifications, owner, "", subscribed...)
	}
	return complete
}

// moved reports whether the client's slot map names another master for
// the keys than the one logged: setup is due.
// With reload set, the slot map is read first (CLUSTER SLOTS), and settled
// reports whether the master it names serves the slot itself: while it
// redirects (the map came from a node that has not learnt of a migration's
// end yet, or the slot still migrates), the map is to be read again.
// Without reload, settled is true.
func (n *notifier) moved(ctx context.Context, reload bool) (due, settled bool) {
	cc, ok := n.s.client.(*redis.ClusterClient)
	if !ok || !n.s.transactional || n.node == "" {
		return false, true
	}
	ctx, cancel := context.WithTimeout(ctx, n.s.cfg.timeout)
	defer cancel()
	if reload {
		// ForEachMaster reads the slot map first, and waits for it.
		_ = cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil })
	}
	m, err := cc.MasterForKey(ctx, n.s.cfg.layout.keys()[0])
	if err != nil {
		return false, !reload
	}
	if reload && !n.serves(ctx, m) {
		return false, false
	}
	return m.Options().Addr != n.node, true
}

// serves reports whether the node of c serves the keys' slot, by a keyed
// command sent to that node alone: false when it redirects it (MOVED: it
// no longer holds the slot; ASK: the slot migrates away from it). A node
// that does not answer, or refuses the command otherwise, is taken to
// serve it: only a redirection shows a slot map out of date.
func (n *notifier) serves(ctx context.Context, c *redis.Client) bool {
	err := c.Exists(ctx, n.s.cfg.layout.keys()[0]).Err()
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return true
	}
	msg := re.Error()
	return !strings.HasPrefix(msg, "MOVED ") && !strings.HasPrefix(msg, "ASK ")
}
