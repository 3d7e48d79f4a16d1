package redisrules

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/graylb/graylb"
	"github.com/redis/go-redis/v9"
)

// switchPeek is how much of the switch value is read: enough to tell
// "true" and "false" and to show an unexpected value in a warning, however
// large the value is.
const switchPeek = 32

// threeKeys is the layout of a switch string and two lists.
type threeKeys struct {
	switchKey, usersKey, addrsKey string
}

func (l *threeKeys) keys() []string { return []string{l.switchKey, l.usersKey, l.addrsKey} }

func (l *threeKeys) describe() string {
	return "keys switch " + l.switchKey + ", users " + l.usersKey + ", addresses " + l.addrsKey
}

// eventClasses: string commands ($), list commands (l), generic ones such
// as DEL and RENAME (g), expiry (x).
func (l *threeKeys) eventClasses() string { return "$lgx" }

func (l *threeKeys) queue(p redis.Pipeliner, maxEntries int) func() (content, error) {
	ctx := context.Background() // the pipeline's Exec carries the context
	strlen := p.StrLen(ctx, l.switchKey)
	peek := p.GetRange(ctx, l.switchKey, 0, switchPeek-1)
	users := p.LRange(ctx, l.usersKey, 0, int64(maxEntries)) // one more than allowed: tells "too many"
	addrs := p.LRange(ctx, l.addrsKey, 0, int64(maxEntries))
	return func() (content, error) {
		var c content
		sum := newSummer("three-keys")
		for _, r := range []struct {
			key string
			err error
		}{{l.switchKey, strlen.Err()}, {l.switchKey, peek.Err()}, {l.usersKey, users.Err()}, {l.addrsKey, addrs.Err()}} {
			cerr, rerr := replyErr(r.key, r.err)
			if rerr != nil {
				return content{}, rerr
			}
			if cerr != nil && c.err == nil {
				c.err = cerr
				sum.add("wrong type: " + r.key)
			}
		}
		if c.err != nil {
			c.sum = sum.sum()
			return c, nil
		}
		sum.add(strconv.FormatInt(strlen.Val(), 10))
		sum.add(peek.Val())
		for _, list := range [][]string{users.Val(), addrs.Val()} {
			sum.add(strconv.Itoa(len(list)))
			for _, e := range list {
				sum.add(e)
			}
		}
		c.sum = sum.sum()
		c.rules, c.warnings, c.err = l.rules(strlen.Val(), peek.Val(), users.Val(), addrs.Val(), maxEntries)
		return c, nil
	}
}

// rules maps what the keys hold onto Rules: the switch length and its
// first bytes, and the two lists (each read up to maxEntries+1 entries).
func (l *threeKeys) rules(switchLen int64, switchPeek string, users, addrs []string, maxEntries int) (graylb.Rules, []string, error) {
	var warnings []string
	on := switchLen == int64(len("true")) && strings.EqualFold(switchPeek, "true")
	if switchLen == 0 {
		// The layout's rule (a missing switch is off), but never silent: a
		// flushed database, a wrong one or a misspelt key name lands here.
		warnings = append(warnings, fmt.Sprintf("switch key %q is missing or empty: gray routing is off, every instance serves every request (SET it to true to route by kind)", l.switchKey))
	}
	if switchLen > 0 && !on && !(switchLen == int64(len("false")) && strings.EqualFold(switchPeek, "false")) {
		shown := fmt.Sprintf("%q", switchPeek)
		if switchLen > int64(len(switchPeek)) {
			shown += fmt.Sprintf(" (first %d of %d bytes)", len(switchPeek), switchLen)
		}
		warnings = append(warnings, fmt.Sprintf("switch key %q holds %s, neither true nor false: gray routing is off", l.switchKey, shown))
	}
	size := 0
	for _, list := range []struct {
		key     string
		entries []string
	}{{l.usersKey, users}, {l.addrsKey, addrs}} {
		if len(list.entries) > maxEntries {
			return graylb.Rules{}, warnings, fmt.Errorf("%w: redisrules: list %q holds more than %d entries", graylb.ErrInvalidRules, list.key, maxEntries)
		}
		for _, e := range list.entries {
			size += len(e)
		}
	}
	if size > graylb.MaxRulesSize {
		return graylb.Rules{}, warnings, fmt.Errorf("%w: redisrules: lists %q and %q hold %d bytes, at most %d",
			graylb.ErrInvalidRules, l.usersKey, l.addrsKey, size, graylb.MaxRulesSize)
	}
	r := graylb.Rules{Enabled: &on}
	if len(users) > 0 {
		r.GrayUsers = users
	}
	if len(addrs) > 0 {
		r.GrayAddresses = addrs
	}
	// Validate each list alone, so that the error names its key; the index
	// in the error is the entry's index in the list (LINDEX).
	if err := (graylb.Rules{GrayUsers: r.GrayUsers}).Validate(); err != nil {
		return graylb.Rules{}, warnings, fmt.Errorf("redisrules: list %q: %w", l.usersKey, err)
	}
	if err := (graylb.Rules{GrayAddresses: r.GrayAddresses}).Validate(); err != nil {
		return graylb.Rules{}, warnings, fmt.Errorf("redisrules: list %q: %w", l.addrsKey, err)
	}
	if err := r.Validate(); err != nil { // whatever else Validate checks
		return graylb.Rules{}, warnings, fmt.Errorf("redisrules: keys %q, %q, %q: %w", l.switchKey, l.usersKey, l.addrsKey, err)
	}
	return r, warnings, nil
}
