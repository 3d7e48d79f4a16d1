package redisrules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// notifyConfig is the server setting that chooses the keyspace events
// published.
const notifyConfig = "notify-keyspace-events"

// notifier is one watcher's keyspace-notification subscription.
type notifier struct {
	s    *RuleSource
	ps   *redis.PubSub
	ch   <-chan *redis.Message
	mode string // how changes are followed, as last logged
}

// events returns the channel of notifications; nil (never ready) when not
// subscribed.
func (n *notifier) events() <-chan *redis.Message { return n.ch }

// drain takes the notifications already queued, so a burst of changes
// costs one read.
func (n *notifier) drain() {
	for {
		select {
		case _, open := <-n.ch:
			if !open {
				n.close()
				return
			}
		default:
			return
		}
	}
}

func (n *notifier) close() {
	if n.ps != nil {
		_ = n.ps.Close()
	}
	n.ps, n.ch = nil, nil
}

// setup subscribes to the keys' keyspace notifications when the mode and
// the server allow it, and drops the subscription when they no longer do.
// It logs how changes are followed when that changes.
func (n *notifier) setup(ctx context.Context) {
	s := n.s
	_, cluster := s.client.(*redis.ClusterClient)
	if s.cfg.notify == NotifyOff {
		n.report("polling", "keyspace notifications off by option")
		return
	}
	if cluster && !s.transactional {
		n.report("polling", "keys in different hash slots: no one node publishes their notifications")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	need := s.cfg.layout.eventClasses()
	flags, err := s.keyspaceFlags(ctx)
	if err != nil {
		n.close()
		n.report("polling", "cannot read the server's "+notifyConfig+": "+err.Error())
		return
	}
	if s.cfg.notify == NotifyEnable && !allCover(flags, need) {
		if err := s.enableKeyspaceEvents(ctx, flags, need); err != nil {
			n.close()
			n.report("polling", "cannot set the server's "+notifyConfig+": "+err.Error())
			return
		}
		if flags, err = s.keyspaceFlags(ctx); err != nil {
			n.close()
			n.report("polling", "cannot read the server's "+notifyConfig+": "+err.Error())
			return
		}
	}
	if !allPublish(flags, need) {
		n.close()
		n.report("polling", fmt.Sprintf("the server publishes no keyspace events for the keys (%s %q)", notifyConfig, strings.Join(flags, " ")))
		return
	}
	if n.ps != nil && !cluster {
		n.report("notifications", "")
		return
	}
	// On a Cluster the slot's master may have changed: subscribe anew.
	n.close()
	if err := n.subscribe(ctx); err != nil {
		n.report("polling", "cannot subscribe to keyspace notifications: "+err.Error())
		return
	}
	n.report("notifications", "")
}

// subscribe subscribes to the keys' keyspace channels, in every database,
// on the node that publishes them, and waits for the confirmations.
func (n *notifier) subscribe(ctx context.Context) error {
	s := n.s
	keys := s.cfg.layout.keys()
	patterns := make([]string, len(keys))
	for i, k := range keys {
		patterns[i] = "__keyspace@*__:" + globEscape(k)
	}
	var sub interface {
		PSubscribe(ctx context.Context, channels ...string) *redis.PubSub
	} = s.client
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		// Keyspace notifications are published by the node holding the
		// key only.
		master, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return err
		}
		sub = master
	}
	ps := sub.PSubscribe(ctx, patterns...)
	for range patterns {
		msg, err := ps.Receive(ctx)
		if err == nil {
			if _, ok := msg.(*redis.Subscription); !ok {
				err = fmt.Errorf("unexpected reply %T", msg)
			}
		}
		if err != nil {
			_ = ps.Close()
			return err
		}
	}
	n.ps, n.ch = ps, ps.Channel()
	return nil
}

func (n *notifier) report(mode, why string) {
	if mode == n.mode {
		return
	}
	n.mode = mode
	l := n.s.cfg.logger
	if mode == "notifications" {
		l.Info("redisrules: following changes by keyspace notifications, and polling", "keys", n.s.Keys(), "interval", n.s.cfg.interval)
		return
	}
	l.Info("redisrules: following changes by polling", "keys", n.s.Keys(), "interval", n.s.cfg.interval, "reason", why)
}

// keyspaceFlags returns the server's notify-keyspace-events setting; on a
// Cluster, every master's.
func (s *RuleSource) keyspaceFlags(ctx context.Context) ([]string, error) {
	get := func(ctx context.Context, c redis.Cmdable) (string, error) {
		m, err := c.ConfigGet(ctx, notifyConfig).Result()
		if err != nil {
			return "", err
		}
		v, ok := m[notifyConfig]
		if !ok {
			return "", errors.New("not reported")
		}
		return v, nil
	}
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		v, err := get(ctx, s.client)
		return []string{v}, err
	}
	var mu sync.Mutex
	var flags []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		v, err := get(ctx, c)
		mu.Lock()
		flags = append(flags, v)
		mu.Unlock()
		return err
	})
	return flags, err
}

// enableKeyspaceEvents adds K and the needed event classes to each
// server's setting, keeping what is on.
func (s *RuleSource) enableKeyspaceEvents(ctx context.Context, flags []string, need string) error {
	set := func(ctx context.Context, c redis.Cmdable) error {
		v, err := c.ConfigGet(ctx, notifyConfig).Result()
		if err != nil {
			return err
		}
		cur := v[notifyConfig]
		if covers(cur, need) {
			return nil
		}
		return c.ConfigSet(ctx, notifyConfig, merge(cur, need)).Err()
	}
	s.cfg.logger.Warn("redisrules: enabling keyspace notifications on the server (option)", "was", strings.Join(flags, " "))
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return set(ctx, c) })
	}
	return set(ctx, s.client)
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

func allPublish(flags []string, need string) bool {
	for _, f := range flags {
		if !publishes(f, need) {
			return false
		}
	}
	return len(flags) > 0
}

func allCover(flags []string, need string) bool {
	for _, f := range flags {
		if !covers(f, need) {
			return false
		}
	}
	return len(flags) > 0
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
