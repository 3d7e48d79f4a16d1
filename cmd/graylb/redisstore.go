package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/redis/go-redis/v9"
)

// redisStore keeps the rules in Redis, in one of redisrules' two layouts:
// a JSON document in one key, or the three keys (switch, users,
// addresses). Writes are WATCH/MULTI/EXEC transactions: a change to the
// keys between the read a write is based on and the write aborts it.
type redisStore struct {
	client redis.UniversalClient
	addr   string
	// docKey is the document layout's key; empty for the three-key layout.
	docKey string
	// switchKey, usersKey, addrsKey are the three-key layout's keys.
	switchKey, usersKey, addrsKey string
}

func (s *redisStore) describe() string {
	if s.docKey != "" {
		return "redis document " + s.docKey + " @ " + s.addr
	}
	return "redis keys " + s.switchKey + ", " + s.usersKey + ", " + s.addrsKey + " @ " + s.addr
}

func (s *redisStore) keys() []string {
	if s.docKey != "" {
		return []string{s.docKey}
	}
	return []string{s.switchKey, s.usersKey, s.addrsKey}
}

func (s *redisStore) close() error { return s.client.Close() }

// settle is zero: WATCH/MULTI/EXEC is an atomic compare-and-set, and a
// read after EXEC shows the write.
func (s *redisStore) settle() time.Duration { return 0 }

// aux is the key name, after the rules' key (the document key, or the
// switch key of the three-key layout) and a colon: a hash tag in the
// rules' key puts it in the same cluster slot.
func (s *redisStore) aux(name string) auxStore {
	base := s.docKey
	if base == "" {
		base = s.switchKey
	}
	return &redisAux{client: s.client, addr: s.addr, key: base + ":" + name}
}

// redisAux is a string key beside the rules.
type redisAux struct {
	client redis.UniversalClient
	addr   string
	key    string
}

func (a *redisAux) describe() string { return "redis key " + a.key + " @ " + a.addr }

func (a *redisAux) read(ctx context.Context, c redis.Cmdable) (document, error) {
	v, err := c.Get(ctx, a.key).Result()
	if errors.Is(err, redis.Nil) {
		return document{rev: "missing"}, nil
	}
	if err != nil {
		return document{}, fmt.Errorf("redis %s: %w", a.key, err)
	}
	return document{data: []byte(v), exists: true, rev: "doc:" + v}, nil
}

func (a *redisAux) get(ctx context.Context) (document, error) { return a.read(ctx, a.client) }

// put is SET with PX ttl (no expiry when ttl ≤ 0) inside WATCH/MULTI.
func (a *redisAux) put(ctx context.Context, prev document, data []byte, ttl time.Duration) error {
	return a.cas(ctx, prev, func(p redis.Pipeliner) {
		p.Set(ctx, a.key, data, max(ttl, 0))
	})
}

func (a *redisAux) remove(ctx context.Context, prev document) error {
	return a.cas(ctx, prev, func(p redis.Pipeliner) { p.Del(ctx, a.key) })
}

func (a *redisAux) cas(ctx context.Context, prev document, write func(redis.Pipeliner)) error {
	err := a.client.Watch(ctx, func(tx *redis.Tx) error {
		now, err := a.read(ctx, tx)
		if err != nil {
			return err
		}
		if now.rev != prev.rev {
			return errConflict
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			write(p)
			return nil
		})
		return err
	}, a.key)
	if errors.Is(err, redis.TxFailedErr) {
		return errConflict
	}
	return err
}

func (s *redisStore) get(ctx context.Context) (document, error) {
	var d document
	err := s.client.Watch(ctx, func(tx *redis.Tx) error {
		var err error
		d, err = s.read(ctx, tx)
		return err
	}, s.keys()...)
	return d, err
}

// read reads the keys on c (inside a WATCH).
func (s *redisStore) read(ctx context.Context, c redis.Cmdable) (document, error) {
	if s.docKey != "" {
		n, err := c.StrLen(ctx, s.docKey).Result()
		if err != nil {
			return document{}, fmt.Errorf("redis %s: %w", s.docKey, err)
		}
		if n > graylb.MaxRulesSize {
			return document{}, fmt.Errorf("redis key %q holds %d bytes, more than a rule document may (%d)", s.docKey, n, graylb.MaxRulesSize)
		}
		v, err := c.Get(ctx, s.docKey).Result()
		if errors.Is(err, redis.Nil) {
			return document{rev: "missing"}, nil
		}
		if err != nil {
			return document{}, fmt.Errorf("redis %s: %w", s.docKey, err)
		}
		return document{data: []byte(v), exists: true, rev: "doc:" + v}, nil
	}
	sw, err := c.Get(ctx, s.switchKey).Result()
	swMissing := errors.Is(err, redis.Nil)
	if err != nil && !swMissing {
		return document{}, fmt.Errorf("redis %s: %w", s.switchKey, err)
	}
	var lists [2][]string
	for i, k := range []string{s.usersKey, s.addrsKey} {
		n, err := c.LLen(ctx, k).Result()
		if err != nil {
			return document{}, fmt.Errorf("redis %s: %w", k, err)
		}
		if n > 100_000 {
			return document{}, fmt.Errorf("redis list %q holds %d entries, more than a client accepts (100000)", k, n)
		}
		if lists[i], err = c.LRange(ctx, k, 0, -1).Result(); err != nil {
			return document{}, fmt.Errorf("redis %s: %w", k, err)
		}
	}
	raw, _ := json.Marshal([]any{swMissing, sw, lists[0], lists[1]})
	on := strings.EqualFold(sw, "true")
	r := graylb.Rules{Enabled: &on, GrayUsers: lists[0], GrayAddresses: lists[1]}
	data, _ := json.MarshalIndent(r, "", "  ")
	exists := !swMissing || len(lists[0]) > 0 || len(lists[1]) > 0
	return document{data: append(data, '\n'), exists: exists, rev: "keys:" + string(raw)}, nil
}

// put writes data if the keys still hold what prev was read from.
func (s *redisStore) put(ctx context.Context, prev document, data []byte) error {
	var r graylb.Rules
	if s.docKey == "" {
		var err error
		if r, err = graylb.ParseRules(data); err != nil {
			return err
		}
		if err := threeKeysCanHold(r); err != nil {
			return err
		}
	}
	err := s.client.Watch(ctx, func(tx *redis.Tx) error {
		now, err := s.read(ctx, tx)
		if err != nil {
			return err
		}
		if now.rev != prev.rev {
			return errConflict
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if s.docKey != "" {
				p.Set(ctx, s.docKey, data, 0)
				return nil
			}
			on := r.Enabled == nil || *r.Enabled
			p.Set(ctx, s.switchKey, strconv.FormatBool(on), 0)
			for _, l := range []struct {
				key     string
				entries []string
			}{{s.usersKey, r.GrayUsers}, {s.addrsKey, r.GrayAddresses}} {
				p.Del(ctx, l.key)
				if len(l.entries) > 0 {
					vals := make([]any, len(l.entries))
					for i, e := range l.entries {
						vals[i] = e
					}
					p.RPush(ctx, l.key, vals...)
				}
			}
			return nil
		})
		return err
	}, s.keys()...)
	if errors.Is(err, redis.TxFailedErr) {
		return errConflict
	}
	return err
}

// threeKeysCanHold refuses rules the three-key layout cannot express.
func threeKeysCanHold(r graylb.Rules) error {
	var extra []string
	if r.Closed {
		extra = append(extra, "closed")
	}
	if r.CanaryPercent != 0 {
		extra = append(extra, "canaryPercent")
	}
	if r.ShadowPercent != 0 {
		extra = append(extra, "shadowPercent")
	}
	if len(r.Matches) > 0 {
		extra = append(extra, "matches")
	}
	if len(extra) > 0 {
		return fmt.Errorf("the three-key Redis layout holds only enabled, grayUsers and grayAddresses, not %s: keep the rules as a document (--redis-key) to use them", strings.Join(extra, ", "))
	}
	return nil
}
