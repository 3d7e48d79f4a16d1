package redisrules

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/redis/go-redis/v9"
)

// RuleSource is a graylb.RuleSource over Redis: it reads the rules from the
// keys of its layout (WithKeys, the default, or WithDocument) and follows
// their changes by polling, and by keyspace notifications when the server
// publishes them. It is safe for concurrent use.
//
// What it guarantees:
//   - The keys are read in one round trip: one MULTI/EXEC transaction, or,
//     on a Cluster whose keys are in different hash slots, one pipeline
//     (each node's part then read on its own).
//   - Watch calls fn only with valid rules that differ from the last ones
//     it delivered (or loaded): unchanged data rebuilds nothing.
//   - Content that does not make valid rules is refused with an error
//     wrapping graylb.ErrInvalidRules that names the key; the previous
//     rules stay in force. Watch logs it, and reports it to OnRefused's
//     functions, once per distinct content.
//   - While Redis is unreachable the current rules stay in force; Watch
//     logs the outage once and the recovery once, not every poll.
//   - Credentials and TLS settings stay inside the client: no log line or
//     error of this package holds them.
type RuleSource struct {
	client        redis.UniversalClient
	owned         bool // the client was built here; Close closes it
	cfg           config
	transactional bool
	failing       atomic.Bool // the last read failed: on a Cluster, checkMaster first
	server        string      // where the client reads, for Describe

	mu         sync.Mutex
	closed     bool
	down       bool // an outage was reported and has not ended
	refused    [sha256.Size]byte
	hasRefused bool // refused holds the sum of the last refused content
	loaded     *content
	watchers   map[*watcher]struct{}

	refusals adapter.Watchers[func(error)]
}

// New returns a RuleSource reading through client: a single server's,
// a Sentinel failover client or a Cluster client, built by the caller with
// its credentials and TLS settings. Close does not close client.
func New(client redis.UniversalClient, opts ...Option) (*RuleSource, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOption)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	s := &RuleSource{client: client, cfg: cfg, transactional: true, watchers: map[*watcher]struct{}{}, server: describeClient(client)}
	if _, ok := client.(*redis.ClusterClient); ok && !sameSlot(cfg.layout.keys()) {
		// A transaction cannot span hash slots; a pipeline can.
		s.transactional = false
	}
	return s, nil
}

// NewFromOptions builds a client with redis.NewUniversalClient(o) (one
// address: a single server; MasterName set: Sentinel; several addresses: a
// Cluster) and returns a RuleSource reading through it. Close closes the
// client.
func NewFromOptions(o *redis.UniversalOptions, opts ...Option) (*RuleSource, error) {
	if o == nil {
		return nil, fmt.Errorf("%w: nil redis options", ErrInvalidOption)
	}
	if _, err := newConfig(opts); err != nil {
		return nil, err
	}
	s, err := New(redis.NewUniversalClient(o), opts...)
	if err != nil {
		return nil, err
	}
	s.owned = true
	if o.MasterName != "" { // the failover client knows no more of its Sentinels
		s.server = "Sentinel master " + o.MasterName + " via " + joinAddrs(o.Addrs)
	}
	return s, nil
}

// Describe says where the rules are (see graylb.RuleSource): "redis", the
// layout and its keys, "@" and the server: its address, "cluster" and the
// addresses given, or "Sentinel master <name> via" the Sentinels' addresses
// (NewFromOptions; a failover client handed to New says only that it is
// one). It holds no credential: addresses lose any user information.
func (s *RuleSource) Describe() string {
	return "redis " + s.cfg.layout.describe() + " @ " + s.server
}

// describeClient names the server client reads from.
func describeClient(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		if o := c.Options(); o.Addr != "FailoverClient" { // what go-redis names a Sentinel failover client's
			return withoutUserInfo(o.Addr)
		}
		return "a Sentinel failover client"
	case *redis.ClusterClient:
		return "cluster " + joinAddrs(c.Options().Addrs)
	case *redis.Ring:
		addrs := make([]string, 0, len(c.Options().Addrs))
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		return "ring " + joinAddrs(addrs)
	}
	return fmt.Sprintf("a client of type %T", client)
}

func joinAddrs(addrs []string) string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = withoutUserInfo(a)
	}
	return strings.Join(out, ",")
}

// withoutUserInfo drops what precedes an "@" in an address: user
// information has no place in a text shown to operators.
func withoutUserInfo(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// Keys returns the key names read, in the layout's order: switch, users,
// addresses; or the document key.
func (s *RuleSource) Keys() []string { return s.cfg.layout.keys() }

// Load reads the keys once and returns the rules they make. The error wraps
// ErrRedis when Redis could not be read (then the caller keeps its current
// rules), or graylb.ErrInvalidRules, naming the key, when the content does
// not make valid rules. In the document layout a missing key gives the zero
// Rules. Load does not log what it returns.
func (s *RuleSource) Load(ctx context.Context) (graylb.Rules, error) {
	if s.isClosed() {
		return graylb.Rules{}, fmt.Errorf("redisrules: %w", graylb.ErrClosed)
	}
	c, err := s.read(ctx, false)
	if err != nil {
		s.outage(err, false) // the caller reports it
		return graylb.Rules{}, err
	}
	s.reachable()
	s.warn(c.warnings)
	if c.err != nil {
		s.refuse(c.sum, c.err, false)
		return graylb.Rules{}, c.err
	}
	s.accept()
	s.mu.Lock()
	s.loaded = &c
	s.mu.Unlock()
	return clone(c.rules), nil
}

// read reads the layout's keys in one round trip, bounded by the timeout.
// The error wraps ErrRedis; content errors are in the content. With check
// set, or after a read failed, checkMaster runs first.
func (s *RuleSource) read(ctx context.Context, check bool) (content, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if check || s.failing.Load() {
		if err := s.checkMaster(ctx); err != nil {
			return content{}, fmt.Errorf("%w: %w", ErrRedis, err)
		}
	}
	var p redis.Pipeliner
	if s.transactional {
		p = s.client.TxPipeline()
	} else {
		p = s.client.Pipeline()
	}
	result := s.cfg.layout.queue(p, s.cfg.maxEntries)
	cmds, err := p.Exec(ctx) // result looks at every reply's error
	if err != nil && !errors.Is(err, redis.Nil) {
		replied := false
		for _, c := range cmds {
			replied = replied || c.Err() != nil
		}
		if !replied {
			// Some client versions report a failed round trip by Exec's
			// error alone, leaving the commands' errors unset.
			s.failing.Store(true)
			return content{}, fmt.Errorf("%w: %w", ErrRedis, err)
		}
	}
	c, err := result()
	s.failing.Store(err != nil)
	return c, err
}

// checkMaster runs before a read on a Cluster after a read failed, and
// before each read of a Watch that recovers (see retryInterval). go-redis
// reloads its slot map on a MOVED reply, or when the map is older than 10 s,
// not when a slot's master stopped answering; and its transaction to a
// master that refuses connections does not fail at once: go-redis (v9.0.0)
// retries it, sends its MULTI and EXEC alone to a random other master, and
// waits for a reply that does not come for the client's read timeout (3 s
// by default), whatever the context's deadline. So: when the master of the
// keys' slot does not answer a PING, the slot map is read again at once
// (CLUSTER SLOTS); the error is that master's when it still holds the slot
// (its replica has not taken over yet), nil when another master does. A
// replica promoted after a master died is then read, and its notifications
// followed, within a retry of the promotion.
func (s *RuleSource) checkMaster(ctx context.Context) error {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	key := s.cfg.layout.keys()[0] // on a Cluster, a multi-slot layout's first key
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	if err = m.Ping(ctx).Err(); err == nil {
		return nil
	}
	// ForEachMaster reads the slot map first, and waits for it.
	if rerr := cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }); rerr != nil {
		return rerr
	}
	now, merr := cc.MasterForKey(ctx, key)
	if merr != nil {
		return merr
	}
	if now.Options().Addr == m.Options().Addr {
		return err
	}
	return nil
}

// Close stops every Watch of this RuleSource and, when NewFromOptions built
// the client, closes it. Load and Watch fail after Close.
func (s *RuleSource) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ws := make([]*watcher, 0, len(s.watchers))
	for w := range s.watchers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	if s.owned {
		return s.client.Close()
	}
	return nil
}

func (s *RuleSource) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// outage records that Redis could not be read; the first failure of an
// outage is logged when log is set.
func (s *RuleSource) outage(err error, log bool) {
	s.mu.Lock()
	first := !s.down
	s.down = true
	s.mu.Unlock()
	if first && log {
		s.cfg.logger.Error("redisrules: redis unavailable; the current rules stay in force", "keys", s.Keys(), "err", err)
	}
}

// reachable records a successful read, logging the end of an outage.
func (s *RuleSource) reachable() {
	s.mu.Lock()
	was := s.down
	s.down = false
	s.mu.Unlock()
	if was {
		s.cfg.logger.Info("redisrules: redis reachable again", "keys", s.Keys())
	}
}

// refuse records refused content, logged and reported to OnRefused's
// functions when log is set and the content differs from the last refused.
func (s *RuleSource) refuse(sum [sha256.Size]byte, err error, log bool) {
	s.mu.Lock()
	seen := s.hasRefused && s.refused == sum
	s.refused, s.hasRefused = sum, true
	s.mu.Unlock()
	if !seen && log {
		s.cfg.logger.Error("redisrules: rules refused; the previous rules stay in force", "keys", s.Keys(), "err", err)
		for _, f := range s.refusals.Snapshot() {
			f(err)
		}
	}
}

// OnRefused calls fn with the error (wrapping graylb.ErrInvalidRules, naming
// the key) of content a Watch refuses, once per distinct content, until
// stop is called (see graylb.RuleSource). Load's refusals are not
// reported: Load returns them.
func (s *RuleSource) OnRefused(fn func(error)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	return s.refusals.Add(fn)
}

// accept records that valid content was read.
func (s *RuleSource) accept() {
	s.mu.Lock()
	s.hasRefused = false
	s.mu.Unlock()
}

func (s *RuleSource) warn(warnings []string) {
	for _, w := range warnings {
		s.cfg.logger.Warn("redisrules: " + w)
	}
}

var (
	_ graylb.RuleSource                          = (*RuleSource)(nil)
	_ interface{ OnRefused(func(error)) func() } = (*RuleSource)(nil) // graylb.RuleSource's OnRefused
)
