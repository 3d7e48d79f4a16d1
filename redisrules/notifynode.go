package redisrules

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

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
