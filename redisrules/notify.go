package redisrules

import (
	"context"
	"errors"
	"fmt"
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
// reports false when a node could not be asked or subscribed to: setup is
// then due again.
func (n *notifier) setup(ctx context.Context) bool {
	s := n.s
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
	} else {
		owner = serverName(ctx, s.client)
		visit(ctx, owner, s.client)
	}

	complete := true
	for addr := range n.subs {
		if _, ok := results[addr]; !ok {
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
// With reload set, the slot map is read first (CLUSTER SLOTS).
func (n *notifier) moved(ctx context.Context, reload bool) bool {
	cc, ok := n.s.client.(*redis.ClusterClient)
	if !ok || !n.s.transactional || n.node == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, n.s.cfg.timeout)
	defer cancel()
	if reload {
		// ForEachMaster reads the slot map first, and waits for it.
		_ = cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil })
	}
	m, err := cc.MasterForKey(ctx, n.s.cfg.layout.keys()[0])
	return err == nil && m.Options().Addr != n.node
}

// nodeClient is what setup needs of a node's client.
type nodeClient interface {
	redis.Cmdable
	PSubscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// nodeResult is what prepare found on one node.
type nodeResult struct {
	sub    *nodeSub // a new subscription, nil when none was made
	why    string   // why the node is not (or no longer) subscribed; "" when it is
	failed bool     // the node did not answer: ask again
}

// prepare reads the node's notify-keyspace-events (enabling the needed
// classes under NotifyEnable) and, when the node publishes the keys'
// events and has no live subscription yet (have), subscribes. A node that
// does not answer keeps its live subscription and is asked again at the
// next setup; one that answers with an error (a refused CONFIG) is not.
func (n *notifier) prepare(ctx context.Context, addr string, c nodeClient, have bool) nodeResult {
	s := n.s
	fail := func(what string, err error) nodeResult {
		var refused redis.Error
		if errors.As(err, &refused) || errors.Is(err, errNotReported) {
			return nodeResult{why: what + ": " + err.Error()}
		}
		if have {
			return nodeResult{failed: true} // what it had still comes
		}
		return nodeResult{why: what + ": " + err.Error(), failed: true}
	}
	need := s.cfg.layout.eventClasses()
	flags, err := nodeFlags(ctx, c)
	if err != nil {
		return fail("cannot read "+addr+"'s "+notifyConfig, err)
	}
	if s.cfg.notify == NotifyEnable && !covers(flags, need) {
		s.cfg.logger.Warn("redisrules: enabling keyspace notifications on the server (option)", "node", addr, "was", flags)
		if err := c.ConfigSet(ctx, notifyConfig, merge(flags, need)).Err(); err != nil {
			return fail("cannot set "+addr+"'s "+notifyConfig, err)
		}
		if flags, err = nodeFlags(ctx, c); err != nil {
			return fail("cannot read "+addr+"'s "+notifyConfig, err)
		}
	}
	if !publishes(flags, need) {
		return nodeResult{why: fmt.Sprintf("%s publishes no keyspace events for the keys (%s %q)", addr, notifyConfig, flags)}
	}
	if have {
		return nodeResult{}
	}
	ps, err := n.subscribe(ctx, c)
	if err != nil {
		return fail("cannot subscribe to keyspace notifications on "+addr, err)
	}
	return nodeResult{sub: &nodeSub{ps: ps, stop: make(chan struct{}), done: make(chan struct{})}}
}

// subscribe subscribes to the keys' keyspace channels, in every database,
// on the node of c, and waits for the confirmations.
func (n *notifier) subscribe(ctx context.Context, c nodeClient) (*redis.PubSub, error) {
	keys := n.s.cfg.layout.keys()
	patterns := make([]string, len(keys))
	for i, k := range keys {
		patterns[i] = "__keyspace@*__:" + globEscape(k)
	}
	ps := c.PSubscribe(ctx, patterns...)
	for range patterns {
		msg, err := ps.Receive(ctx)
		if err == nil {
			if _, ok := msg.(*redis.Subscription); !ok {
				err = fmt.Errorf("unexpected reply %T", msg)
			}
		}
		if err != nil {
			_ = ps.Close()
			return nil, err
		}
	}
	return ps, nil
}

// report logs how changes are followed when the mode, the keys' node or
// the subscribed masters change.
func (n *notifier) report(mode, node, why string, subscribed ...string) {
	line := mode + "\x00" + node + "\x00" + strings.Join(subscribed, ",")
	n.mode, n.node = mode, node
	if line == n.logged {
		return
	}
	n.logged = line
	attrs := []any{"keys", n.s.Keys(), "interval", n.s.cfg.interval}
	if node != "" {
		attrs = append(attrs, "node", node)
	}
	if len(subscribed) > 0 {
		attrs = append(attrs, "subscribed", strings.Join(subscribed, ","))
	}
	l := n.s.cfg.logger
	if mode == modeNotifications {
		l.Info("redisrules: following changes by keyspace notifications, and polling", attrs...)
		return
	}
	l.Info("redisrules: following changes by polling", append(attrs, "reason", why)...)
}

// errNotReported is a server's answer to CONFIG GET that lacks the setting.
var errNotReported = errors.New("not reported")

// nodeFlags returns the node's notify-keyspace-events setting.
func nodeFlags(ctx context.Context, c redis.Cmdable) (string, error) {
	m, err := c.ConfigGet(ctx, notifyConfig).Result()
	if err != nil {
		return "", err
	}
	v, ok := m[notifyConfig]
	if !ok {
		return "", errNotReported
	}
	return v, nil
}

// serverName names the server a single-server or Sentinel failover client
// talks to: its address; for a failover client, the address of the master
// it reaches now, as the server reports it (CLIENT INFO, Redis 6.2 and
// later), else "the Sentinel's master".
func serverName(ctx context.Context, c redis.UniversalClient) string {
	rc, ok := c.(*redis.Client)
	if !ok {
		return describeClient(c)
	}
	if a := rc.Options().Addr; a != "FailoverClient" {
		return withoutUserInfo(a)
	}
	info, err := rc.Do(ctx, "CLIENT", "INFO").Text()
	if err == nil {
		for _, f := range strings.Fields(info) {
			if a, ok := strings.CutPrefix(f, "laddr="); ok {
				return a
			}
		}
	}
	return "the Sentinel's master"
}

// publishes reports whether a server with these flags publishes keyspace
// events of at least one of the needed classes. Events of a class it
// does not publish are caught by polling.
func publishes(flags, need string) bool {
	return strings.Contains(flags, "K") && (strings.Contains(flags, "A") || strings.ContainsAny(flags, need))
}

// covers reports whether a server with these flags publishes every needed
// class of keyspace events.
func covers(flags, need string) bool {
	if !strings.Contains(flags, "K") {
		return false
	}
	if strings.Contains(flags, "A") {
		return true
	}
	for _, c := range need {
		if !strings.ContainsRune(flags, c) {
			return false
		}
	}
	return true
}

// merge returns flags with K and the needed classes added.
func merge(flags, need string) string {
	out := flags
	if !strings.Contains(out, "K") {
		out += "K"
	}
	if strings.Contains(out, "A") {
		return out
	}
	for _, c := range need {
		if !strings.ContainsRune(out, c) {
			out += string(c)
		}
	}
	return out
}

// globEscape escapes the glob characters of a PSUBSCRIBE pattern.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ { // bytewise: a key need not be UTF-8
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cluster reports whether the keys are in one slot of a Cluster.
func (n *notifier) cluster() bool {
	_, ok := n.s.client.(*redis.ClusterClient)
	return ok && n.s.transactional
}
